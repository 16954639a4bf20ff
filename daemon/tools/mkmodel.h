// `wasted mkmodel`: the command-line face of the synthetic model writer
// (synthetic_model.h): parses flags into MkModelOptions, writes the model,
// prints what it wrote. Tests that only need a synthetic model depend on
// //daemon/tools:synthetic_model, not on this command.
#ifndef WASTE_DAEMON_TOOLS_MKMODEL_H_
#define WASTE_DAEMON_TOOLS_MKMODEL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/tools/synthetic_model.h"

namespace waste::tools {

// Parses `wasted mkmodel` flags (without the subcommand). Errors name the
// flag and say what it accepts.
absl::StatusOr<MkModelOptions> ParseMkModelArgs(const std::vector<std::string>& args);

// `wasted mkmodel`: returns the process exit code.
int RunMkModel(const std::vector<std::string>& args);

}  // namespace waste::tools

#endif  // WASTE_DAEMON_TOOLS_MKMODEL_H_
