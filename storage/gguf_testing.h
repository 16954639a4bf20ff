// Test helpers for the GGUF module: a RandomAccessFile over bytes in memory.
// (storage::MemEnv is the general in-memory Env; this fake keeps the GGUF
// tests and the fuzzer free of any Env implementation.)
#ifndef WASTE_STORAGE_GGUF_TESTING_H_
#define WASTE_STORAGE_GGUF_TESTING_H_

#include <cstring>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "storage/env.h"

namespace waste::storage::testing {

// Reads from a copy of `bytes`. Thread-safe (immutable).
class StringFile final : public RandomAccessFile {
 public:
  explicit StringFile(std::string bytes, std::string path = "mem.gguf")
      : bytes_(std::move(bytes)), path_(std::move(path)) {}

  absl::Status Read(uint64_t offset, size_t n, char* buffer) const override {
    if (offset > bytes_.size() || n > bytes_.size() - offset) {
      return absl::OutOfRangeError(absl::StrCat(path_, ": read of ", n, " bytes at ", offset,
                                                " past end of file (size ", bytes_.size(), ")"));
    }
    if (n > 0) std::memcpy(buffer, bytes_.data() + offset, n);
    return absl::OkStatus();
  }
  uint64_t Size() const override { return bytes_.size(); }
  const std::string& Path() const override { return path_; }
  bool Direct() const override { return false; }
  size_t Alignment() const override { return 1; }

 private:
  std::string bytes_;
  std::string path_;
};

}  // namespace waste::storage::testing

#endif  // WASTE_STORAGE_GGUF_TESTING_H_
