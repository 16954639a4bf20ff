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

// The prompt for `turns`, ending with the opening of an assistant turn when
// `add_generation_prompt`. Special tokens appear as text (tokenize with
// parse_special); BOS is not included (the tokenizer's add_bos adds it).
// Harmony's system message names `date` (YYYY-MM-DD; empty: today, UTC).
std::string RenderChat(ChatFormat format, const std::vector<ChatTurn>& turns,
                       bool add_generation_prompt, const std::string& date = "");

}  // namespace waste::text

#endif  // WASTE_DAEMON_TEXT_CHAT_TEMPLATE_H_
