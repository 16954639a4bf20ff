// A tool call in a chat reply, and the markups models write calls in (see
// tool_call_stream.h for each).
#ifndef WASTE_COMMON_TOOL_CALL_H_
#define WASTE_COMMON_TOOL_CALL_H_

#include <string>
#include <string_view>

namespace waste {

struct ToolCall {
  std::string id;  // The model's own (kimi-k2) or the client's; may be empty.
  std::string name;
  std::string arguments;  // A JSON object, as text.
};

// kHarmony: gpt-oss's messages to "functions.NAME" (harmony_stream.h
// takes them out of a reply with its reasoning).
enum class ToolFormat {
  kNone,
  kHermes,
  kGlm,
  kKimiK2,
  kHarmony,
  kDeepSeekV31,
  kLlama3Json,
  kMistral,
  kLast = kMistral,
};

// "hermes", "glm", "kimi-k2", "harmony", "deepseek-v3.1", "llama3-json",
// "mistral" ("" for kNone); and
// back (kNone for anything else).
const char* ToolFormatName(ToolFormat format);
ToolFormat ParseToolFormat(std::string_view name);

}  // namespace waste

#endif  // WASTE_COMMON_TOOL_CALL_H_
