// Mistral's [INST] chat templates, each as Jinja renders the template its
// models carry (chat_template.h's kMistral* formats). Internal to
// daemon/text: RenderChat's.
#ifndef WASTE_DAEMON_TEXT_CHAT_MISTRAL_H_
#define WASTE_DAEMON_TEXT_CHAT_MISTRAL_H_

#include <string>
#include <vector>

#include "daemon/text/chat_template.h"

namespace waste::text {

// Which Mistral format a GGUF template containing "[INST]" is (their markers,
// as llama.cpp tells them apart), or kLlama2 for Llama 2's own (<<SYS>>, or a
// BOS before each [INST]).
ChatFormat DetectMistralFormat(const std::string& jinja_template);

// `turns` in a kMistral* format.
std::string RenderMistral(ChatFormat format, const std::vector<ChatTurn>& turns,
                          const ChatOptions& options);

}  // namespace waste::text

#endif  // WASTE_DAEMON_TEXT_CHAT_MISTRAL_H_
