// `waste-client run MODEL`: an interactive chat. Each turn is sent with the
// whole conversation through the model's chat template, in one daemon
// session, so the daemon finds the earlier turns in the session's KV cache
// and computes only the new tokens. Reads lines from stdin (a prompt is
// shown when stdin is a terminal; a pipe works too); `/bye` ends, `/clear`
// starts a new conversation.
#ifndef WASTE_CLIENT_RUN_COMMAND_H_
#define WASTE_CLIENT_RUN_COMMAND_H_

#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include "client/waste_client.h"

namespace waste {

// `args` follow the command name. Returns the exit code.
int RunChat(WasteClient& client, const std::vector<std::string>& args);

// What every turn of a chat loop sends besides the conversation.
struct ChatLoopOptions {
  std::string system;  // A system message first, when not empty.
  int max_tokens = 0;  // 0: until the end of the reply.
  // Reasoning controls (ChatMessages' thinking and reasoning_effort).
  v1::ChatMessages controls;
};

// The loop itself, over any streams (tests drive it with strings).
// `interactive` shows the "> " prompt.
int RunChatLoop(WasteClient& client, const std::string& model, const ChatLoopOptions& options,
                std::istream& in, std::ostream& out, std::ostream& err, bool interactive);

}  // namespace waste

#endif  // WASTE_CLIENT_RUN_COMMAND_H_
