#include "common/format.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace waste {

std::string FormatBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (std::fabs(value) >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  if (unit == 0) return absl::StrCat(bytes, " B");
  return absl::StrFormat("%.2f %s", value, kUnits[unit]);
}

std::string FormatCount(int64_t count) {
  const double value = static_cast<double>(count);
  if (value >= 1e9) return absl::StrFormat("%.2fB", value / 1e9);
  if (value >= 1e6) return absl::StrFormat("%.1fM", value / 1e6);
  if (value >= 1e3) return absl::StrFormat("%.1fK", value / 1e3);
  return absl::StrCat(count);
}

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  size_t digits = 0;
  while (digits < rest.size() && (absl::ascii_isdigit(rest[digits]) || rest[digits] == '.')) {
    ++digits;
  }
  double number = 0;
  if (digits == 0 || !absl::SimpleAtod(rest.substr(0, digits), &number)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not a byte size (examples: 8GiB, 512MiB, 1073741824)"));
  }
  std::string unit = absl::AsciiStrToLower(absl::StripAsciiWhitespace(rest.substr(digits)));
  double scale = 1;
  if (!unit.empty() && unit != "b") {
    static constexpr std::string_view kPrefixes = "kmgt";
    size_t power = kPrefixes.find(unit[0]);
    absl::string_view suffix = absl::string_view(unit).substr(1);
    bool decimal = suffix == "b";
    if (power == absl::string_view::npos || !(suffix.empty() || suffix == "ib" || decimal)) {
      return absl::InvalidArgumentError(absl::StrCat("'", text, "' has an unknown unit '", unit,
                                                     "' (use B, KiB, MiB, GiB, TiB, KB, MB, GB)"));
    }
    scale = std::pow(decimal ? 1000.0 : 1024.0, static_cast<double>(power + 1));
  }
  double bytes = number * scale;
  if (bytes >= 9.2e18) return absl::InvalidArgumentError(absl::StrCat("'", text, "' is too large"));
  return static_cast<int64_t>(bytes);
}

}  // namespace waste
