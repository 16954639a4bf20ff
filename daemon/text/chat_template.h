// Chat messages -> prompt text, in the format the model was trained on.
//
// GGUF files carry a Jinja template (tokenizer.chat_template); rather than
// embed a Jinja engine, the families that cover nearly every model users run
// are recognised from the template's markers and rendered here: ChatML
// (many fine-tunes), Qwen (ChatML with Hermes-style tool calls), Llama 3, Llama 2, Mistral's
// [INST] templates (v0.1 to Small 3),
// DeepSeek (V2/V3/R1), Kimi-K2 (<|im_user|>user<|im_middle|>...), gpt-oss's harmony
// (<|start|>user<|message|>...<|end|>) and Gemma's (<start_of_turn>user\n...<end_of_turn>). A file
// without a template gets a plain "Role: content" transcript.
#ifndef WASTE_DAEMON_TEXT_CHAT_TEMPLATE_H_
#define WASTE_DAEMON_TEXT_CHAT_TEMPLATE_H_

#include <optional>
#include <string>
#include <vector>

#include "common/tool_call.h"

namespace waste::text {

enum class ChatFormat {
  kPlain,
  kChatMl,
  kQwen,  // ChatML, with tools offered in the system turn and <tool_call>s.
  kLlama3,
  kLlama31,  // Llama 3.1/3.2/3.3: kLlama3, with JSON tool calls ("Environment: ipython").
  kLlama2,
  kMistralInst,    // Mistral 7B v0.1 / Mixtral's first template: "[INST] " + user + " [/INST]".
  kMistralV1,      // " [INST] " (Mistral 7B v0.2, Mixtral 8x7B), the system text in the first turn.
  kMistralV3,      // "[INST] " (Mistral 7B v0.3, Mixtral 8x22B), tools; the system text last.
  kMistralTekken,  // Mistral Nemo's "[INST]" without spaces, the system text in the last turn.
  kMistralV7,      // [SYSTEM_PROMPT] (Mistral Small 3.x, Devstral): "[INST]" without spaces.
  kDeepSeek,       // DeepSeek V2/V3/R1.
  kDeepSeekV31,    // DeepSeek-V3.1: a reply opens with </think> or <think>.
  kKimiK2,
  kHarmony,
  kGlm,
  kGemma  // Gemma 1-3: <start_of_turn>user|model; a system message opens the first user turn.
};

struct ChatTurn {
  std::string role;
  std::string content;
  std::vector<ToolCall> tool_calls;  // An assistant turn's calls.
  std::string tool_call_id;          // A tool turn's: the call it answers.
};

// The format a GGUF chat template (possibly empty) belongs to.
ChatFormat DetectChatFormat(const std::string& jinja_template);
const char* ChatFormatName(ChatFormat format);
// How a format's replies call tools (kNone: it offers no tools).
ToolFormat ChatToolFormat(ChatFormat format);

// How a conversation is rendered, beyond its turns.
struct ChatOptions {
  // End with the opening of an assistant turn.
  bool add_generation_prompt = true;
  // Set only for a template with a thinking switch (HasThinkingSwitch);
  // unset: its default. false: what Qwen3's (ChatML) and GLM's templates
  // write for enable_thinking = false (an empty <think> block opening the
  // reply; GLM also /nothink after each user turn). DeepSeek-V3.1 (whose
  // default is not to reason): true opens the reply with <think>.
  std::optional<bool> thinking;
  // Harmony: "low", "medium" (empty: the default) or "high".
  std::string reasoning_effort;
  // Harmony's system message names `date` (YYYY-MM-DD; empty: today, UTC).
  std::string date;
  // The tools the model may call: a JSON array of OpenAI tool definitions
  // (checked: chat_tools.h's CheckTools), or empty. Only formats with a
  // ChatToolFormat render them.
  std::string tools;
  // kMistralV7: the system message its template writes when the
  // conversation has none (DefaultSystemMessage).
  std::string default_system;
};

// The prompt for `turns`. Special tokens appear as text (tokenize with
// parse_special); BOS is not included (the tokenizer's add_bos adds it).
std::string RenderChat(ChatFormat format, const std::vector<ChatTurn>& turns,
                       const ChatOptions& options);
inline std::string RenderChat(ChatFormat format, const std::vector<ChatTurn>& turns,
                              bool add_generation_prompt, const std::string& date = "") {
  return RenderChat(format, turns, {.add_generation_prompt = add_generation_prompt, .date = date});
}

// The default_system_message a GGUF chat template sets (Mistral Small 3's),
// as Jinja evaluates it: string literals joined by +, and `today`
// (strftime_now("%Y-%m-%d"): `date`, YYYY-MM-DD, or today's, UTC); empty
// where the template sets none, or sets it from anything else.
std::string DefaultSystemMessage(const std::string& jinja_template, const std::string& date = "");

// Whether a GGUF chat template switches reasoning on or off: Qwen3's and
// GLM-4.5's enable_thinking, DeepSeek-V3.1's thinking.
bool HasThinkingSwitch(const std::string& jinja_template);

// Whether a rendered prompt leaves a reasoning block open (DeepSeek-V3.1
// with thinking): the reply starts inside it, and only closes it.
bool PromptOpensReasoning(const std::string& rendered);

}  // namespace waste::text

#endif  // WASTE_DAEMON_TEXT_CHAT_TEMPLATE_H_
