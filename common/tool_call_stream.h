// Tool calls taken out of a chat reply as it streams, in the markup the
// model writes them in:
//   - hermes (Qwen2.5/Qwen3/QwQ): <tool_call>\n{"name": N, "arguments":
//     {...}}\n</tool_call>, one block per call;
//   - glm (GLM-4.5/4.6): <tool_call>N\n<arg_key>K</arg_key>\n<arg_value>V
//     </arg_value>...</tool_call>, a value being raw text where the tool's
//     schema says the parameter is a string and JSON otherwise;
//   - kimi-k2: <|tool_calls_section_begin|><|tool_call_begin|>functions.N:I
//     <|tool_call_argument_begin|>{...}<|tool_call_end|>...
//     <|tool_calls_section_end|>, the call's id being "functions.N:I";
//   - deepseek-v3.1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>N<｜tool▁sep｜>
//     {...}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>;
//   - llama3-json (Llama 3.1/3.2/3.3): the whole reply is the call,
//     {"name": N, "parameters": {...}} (after <|python_tag|> if the model
//     writes it), or several separated by ";" or whitespace. A reply is
//     held back only until its first key shows whether it is one;
//   - mistral (Mistral Nemo): [TOOL_CALLS][{"name": N, "arguments": {...},
//     "id": I}, ...] to the end of the reply, the ids kept.
// Arguments the splitter parses come back as the templates' tojson writes
// JSON (common/python_json.h: what these models were trained to write); a
// Kimi-K2 or DeepSeek call's, as written. Text outside the markup is the
// reply's content, handed back as soon as it
// cannot be the start of a marker; a call is handed back whole when its
// closing marker arrives (or at the end, if the reply stopped just short of
// it with a complete call). A block that does not parse is content,
// markup and all, so nothing the model wrote is lost.
//
// Not thread-safe: one per reply, fed in order.
#ifndef WASTE_COMMON_TOOL_CALL_STREAM_H_
#define WASTE_COMMON_TOOL_CALL_STREAM_H_

#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/tool_call.h"

namespace waste {

class ToolCallSplitter {
 public:
  struct Parts {
    std::string content;
    std::vector<ToolCall> calls;
  };

  // `tools_json`: the request's tools (an OpenAI tools array; glm reads
  // which parameters are strings from their schemas). kNone and kHarmony
  // (whose calls harmony_stream.h takes out) pass all text through.
  ToolCallSplitter(ToolFormat format, std::string_view tools_json);

  // The next piece of the reply's content; returns what of it is now known.
  Parts Add(std::string_view text);
  // At the end of the reply: what was held back.
  Parts Finish();

 private:
  enum class State { kText, kBetween, kCall };
  struct Markers {
    std::string_view section_begin, section_end, call_begin, call_end;
  };

  void Step(bool last, Parts* out);
  // Where the first opening marker starts in pending_ (npos: none), and
  // how many bytes of it.
  size_t FindOpening(size_t* length) const;
  // The call between the markers; false when it does not parse.
  bool ParseCall(std::string_view body, ToolCall* call) const;
  bool ParseGlmCall(std::string_view body, ToolCall* call) const;
  // The calls between the markers (mistral's: several), appended; false
  // when they do not parse.
  bool ParseCalls(std::string_view body, std::vector<ToolCall>* calls) const;
  // llama3-json's replies.
  void StepJsonReply(bool last, Parts* out);

  ToolFormat format_;
  Markers markers_;
  // glm: the (tool, parameter) pairs whose schema type is "string".
  std::set<std::pair<std::string, std::string>> string_parameters_;
  State state_ = State::kText;
  enum class JsonReply { kUndecided, kContent, kCalls };
  JsonReply json_reply_ = JsonReply::kUndecided;
  bool in_section_ = false;
  std::string pending_;  // Text not yet handed back.
};

// The calls a whole reply makes, in `format` (as the OpenAI face takes them
// out while it streams): its reasoning split off first (<think> or harmony;
// `reasoning_open`: the prompt opened a <think> block), gpt-oss's calls
// from its messages, the others from its content; a call whose arguments
// are not a whole JSON object (cut short) is not one.
std::vector<ToolCall> ReplyToolCalls(std::string_view reply, bool reasoning_open, ToolFormat format,
                                     std::string_view tools_json);

}  // namespace waste

#endif  // WASTE_COMMON_TOOL_CALL_STREAM_H_
