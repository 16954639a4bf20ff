// The parts of a chat prompt that offer tools and replay the calls a reply
// made, as each family's template writes them: Qwen's (Hermes-style
// <tools> in the system turn), GLM-4.5's, Kimi-K2's (tool_declare) and
// gpt-oss's (a TypeScript namespace in the developer message),
// DeepSeek-V3.1's (after the system prompt, as its model card shows) and
// Llama 3.1's (JSON in the first user turn).
// JSON goes in as the templates' `tojson` writes it (common/python_json.h).
#ifndef WASTE_DAEMON_TEXT_CHAT_TOOLS_H_
#define WASTE_DAEMON_TEXT_CHAT_TOOLS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/tool_call.h"

namespace waste::text {

// A request's tools: a JSON array of OpenAI tool definitions, each
// {"type": "function", "function": {"name": non-empty string, ...}}.
absl::Status CheckTools(std::string_view tools_json);
// A call an earlier reply made: a name, and arguments that are a JSON
// object.
absl::Status CheckToolCall(const ToolCall& call);

// What Qwen's system turn says of the tools (after the system message's
// text, if any): "# Tools\n\n..." up to the closing </tool_call> example.
std::string QwenToolsText(std::string_view tools_json);
// Qwen's call: <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>.
std::string QwenToolCall(const ToolCall& call);

// GLM-4.5's system turn offering the tools.
std::string GlmToolsTurn(std::string_view tools_json);
// GLM's call: <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>
// \n...</tool_call>, string values raw and the rest as JSON.
std::string GlmToolCall(const ToolCall& call);

// gpt-oss's "## functions" namespace of the tools (in its developer
// message), each as a TypeScript function type.
std::string HarmonyToolsNamespace(std::string_view tools_json);
// A string as the templates' tojson writes it (quoted, escaped).
std::string PythonJsonString(std::string_view text);

// DeepSeek-V3.1's tool description, as its model card writes it after the
// system prompt: each tool's name, description and parameters, then the
// call format.
std::string DeepSeekToolsText(std::string_view tools_json);
// DeepSeek-V3.1's section of calls: <｜tool▁calls▁begin｜>, then
// <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜> each.
std::string DeepSeekToolCalls(const std::vector<ToolCall>& calls);

// Llama 3.1/3.2/3.3's user turn offering the tools (their template's
// default, tools_in_user_message): the instructions, each tool as
// tojson(indent=4), then the first user message's text.
std::string LlamaToolsTurn(std::string_view tools_json, std::string_view first_user_message);
// Llama 3's call: {"name": "N", "parameters": ARGS}.
std::string LlamaToolCall(const ToolCall& call);

// Mistral Nemo's [AVAILABLE_TOOLS][...][/AVAILABLE_TOOLS]: each tool's
// function keys (but "return") as its template writes them, strings raw.
// `spaced`: Mistral 7B v0.3's, with a space before the [.
std::string MistralToolsText(std::string_view tools_json, bool spaced = false);
// Mistral Nemo's [TOOL_CALLS][{"name", "arguments", "id"}, ...]</s>, each
// id as MistralCallId gives it (`spaced`: "[TOOL_CALLS] [", v0.3's).
std::string MistralToolCalls(const std::vector<ToolCall>& calls, bool spaced = false);
// The 9 letters and digits Mistral's template requires of a call id: the
// id itself where it is that, else 9 derived from it (the same for a call
// and the result that names it).
std::string MistralCallId(std::string_view id);

// Kimi-K2's tool declaration turn.
std::string KimiToolsTurn(std::string_view tools_json);
// Kimi-K2's section of calls.
std::string KimiToolCalls(const std::vector<ToolCall>& calls);

}  // namespace waste::text

#endif  // WASTE_DAEMON_TEXT_CHAT_TOOLS_H_
