#include "common/cli_args.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace waste {

std::optional<std::string> ParsedArgs::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::string ParsedArgs::GetOr(const std::string& name, const std::string& fallback) const {
  return Get(name).value_or(fallback);
}

std::vector<std::string> ParsedArgs::GetAll(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

absl::StatusOr<int64_t> ParsedArgs::GetInt(const std::string& name, int64_t fallback) const {
  std::optional<std::string> text = Get(name);
  if (!text) return fallback;
  int64_t value;
  if (!absl::SimpleAtoi(*text, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " expects an integer, got '", *text, "'"));
  }
  return value;
}

absl::StatusOr<double> ParsedArgs::GetDouble(const std::string& name, double fallback) const {
  std::optional<std::string> text = Get(name);
  if (!text) return fallback;
  double value;
  if (!absl::SimpleAtod(*text, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " expects a number, got '", *text, "'"));
  }
  return value;
}

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     const std::vector<FlagDef>& flags) {
  ParsedArgs parsed;
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (flags_done || arg.size() < 2 || arg.compare(0, 2, "--") != 0) {
      parsed.positional_.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> inline_value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const FlagDef* def = nullptr;
    for (const FlagDef& flag : flags) {
      if (flag.name == name) def = &flag;
    }
    if (def == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    if (!def->takes_value) {
      if (inline_value) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      }
      parsed.values_[name].push_back("true");
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
      inline_value = args[++i];
    }
    parsed.values_[name].push_back(*inline_value);
  }
  return parsed;
}

}  // namespace waste
