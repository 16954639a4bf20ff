// Command-line parsing shared by `wasted` and `waste-client` subcommands:
// `--name value`, `--name=value`, boolean `--name`, repeated flags and
// positional arguments; "--" ends the flags.
#ifndef WASTE_COMMON_CLI_ARGS_H_
#define WASTE_COMMON_CLI_ARGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace waste {

struct FlagDef {
  std::string name;  // Without the dashes.
  bool takes_value = true;
};

class ParsedArgs {
 public:
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  // The last value given for a flag.
  std::optional<std::string> Get(const std::string& name) const;
  std::string GetOr(const std::string& name, const std::string& fallback) const;
  // Every value given for a repeated flag, in order.
  std::vector<std::string> GetAll(const std::string& name) const;
  // The flag's value as an integer / float; INVALID_ARGUMENT naming the flag.
  absl::StatusOr<int64_t> GetInt(const std::string& name, int64_t fallback) const;
  absl::StatusOr<double> GetDouble(const std::string& name, double fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  friend absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                              const std::vector<FlagDef>& flags);
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

// Parses `args` (without the program and subcommand names). Unknown flags
// and missing values are errors naming the flag.
absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     const std::vector<FlagDef>& flags);

}  // namespace waste

#endif  // WASTE_COMMON_CLI_ARGS_H_
