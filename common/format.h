// Human-readable numbers for CLI output.
#ifndef WASTE_COMMON_FORMAT_H_
#define WASTE_COMMON_FORMAT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace waste {

// "1.13 MiB", "8.00 GiB", "123 B" (powers of 1024).
std::string FormatBytes(int64_t bytes);

// "1.02B", "852.6M", "260.1K", "512" (powers of 1000, for parameter counts).
std::string FormatCount(int64_t count);

// Parses a byte size: a plain number of bytes, or a number with a unit
// ("512MiB", "8GiB", "1.5G", "64 GB"): K/M/G/T are powers of 1000 when
// followed by "B" without "i"; KiB/MiB/GiB/TiB and bare K/M/G/T are powers of
// 1024.
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text);

}  // namespace waste

#endif  // WASTE_COMMON_FORMAT_H_
