// Chat messages -> prompt text, in the format the model was trained on.
//
// GGUF files carry a Jinja template (tokenizer.chat_template); rather than
// embed a Jinja engine, the families that cover nearly every model users run
// are recognised from the template's markers and rendered here: ChatML
// (Qwen, many fine-tunes), Llama 3, Llama 2 / Mistral [INST], DeepSeek
// (V2/V3/R1), Kimi-K2 (<|im_user|>user<|im_middle|>...) and gpt-oss's
// harmony (<|start|>user<|message|>...<|end|>). A file without a template
// gets a plain "Role: content" transcript.
#ifndef WASTE_DAEMON_TEXT_CHAT_TEMPLATE_H_
#define WASTE_DAEMON_TEXT_CHAT_TEMPLATE_H_

#include <string>
#include <vector>

namespace waste::text {

enum class ChatFormat { kPlain, kChatMl, kLlama3, kLlama2, kDeepSeek, kKimiK2, kHarmony, kGlm };

struct ChatTurn {
  std::string role;
  std::string content;
};

// The format a GGUF chat template (possibly empty) belongs to.
ChatFormat DetectChatFormat(const std::string& jinja_template);
const char* ChatFormatName(ChatFormat format);

// How a conversation is rendered, beyond its turns.
struct ChatOptions {
  // End with the opening of an assistant turn.
  bool add_generation_prompt = true;
  // false: what a template with a thinking switch writes for enable_thinking
  // = false (ChatML, i.e. Qwen3: an empty <think> block opening the reply;
  // GLM: the same, and /nothink after each user turn). Callers check the
  // template has the switch (HasThinkingSwitch).
  bool thinking = true;
  // Harmony: "low", "medium" (empty: the default) or "high".
  std::string reasoning_effort;
  // Harmony's system message names `date` (YYYY-MM-DD; empty: today, UTC).
  std::string date;
};

// The prompt for `turns`. Special tokens appear as text (tokenize with
// parse_special); BOS is not included (the tokenizer's add_bos adds it).
std::string RenderChat(ChatFormat format, const std::vector<ChatTurn>& turns,
                       const ChatOptions& options);
inline std::string RenderChat(ChatFormat format, const std::vector<ChatTurn>& turns,
                              bool add_generation_prompt, const std::string& date = "") {
  return RenderChat(format, turns, {.add_generation_prompt = add_generation_prompt, .date = date});
}

// Whether a GGUF chat template turns reasoning off on enable_thinking
// (Qwen3's, GLM-4.5's).
bool HasThinkingSwitch(const std::string& jinja_template);

}  // namespace waste::text

#endif  // WASTE_DAEMON_TEXT_CHAT_TEMPLATE_H_
