#include "common/tool_call.h"

namespace waste {

const char* ToolFormatName(ToolFormat format) {
  switch (format) {
    case ToolFormat::kHermes:
      return "hermes";
    case ToolFormat::kGlm:
      return "glm";
    case ToolFormat::kKimiK2:
      return "kimi-k2";
    case ToolFormat::kHarmony:
      return "harmony";
    case ToolFormat::kDeepSeekV31:
      return "deepseek-v3.1";
    case ToolFormat::kLlama3Json:
      return "llama3-json";
    case ToolFormat::kMistral:
      return "mistral";
    case ToolFormat::kNone:
      break;
  }
  return "";
}

ToolFormat ParseToolFormat(std::string_view name) {
  for (int f = static_cast<int>(ToolFormat::kNone) + 1; f <= static_cast<int>(ToolFormat::kLast);
       ++f) {
    if (name == ToolFormatName(static_cast<ToolFormat>(f))) return static_cast<ToolFormat>(f);
  }
  return ToolFormat::kNone;
}

}  // namespace waste
