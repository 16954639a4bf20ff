// Human-readable numbers for CLI output.
#ifndef WASTE_CLIENT_FORMAT_H_
#define WASTE_CLIENT_FORMAT_H_

#include <cstdint>
#include <string>

namespace waste {

// "1.13 MiB", "8.00 GiB", "123 B" (powers of 1024).
std::string FormatBytes(int64_t bytes);

}  // namespace waste

#endif  // WASTE_CLIENT_FORMAT_H_
