// `waste-client generate` and `waste-client chat`: stream a generation to
// stdout as it is produced.
#ifndef WASTE_CLIENT_GENERATE_COMMAND_H_
#define WASTE_CLIENT_GENERATE_COMMAND_H_

#include <string>
#include <vector>

#include "client/waste_client.h"
#include "common/cli_args.h"

namespace waste {

// The reasoning flags of `chat` and `run` into a request: --think and
// --no-think (a model with a thinking switch reasons first, or not) and
// --reasoning-effort E (gpt-oss: low, medium, high; the daemon checks it).
void FillReasoning(const ParsedArgs& args, v1::ChatMessages* chat);

// `args` follow the command name. Returns the exit code. `chat` sends the
// prompt as one user message (chat template applied by the daemon).
int RunGenerate(WasteClient& client, const std::vector<std::string>& args, bool chat);

// Prints a failed call as one line (with how to start a daemon when none
// answered) and returns the exit code.
int FailCall(const WasteClient& client, const absl::Status& status);

}  // namespace waste

#endif  // WASTE_CLIENT_GENERATE_COMMAND_H_
