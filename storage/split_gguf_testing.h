// Test helper: splits a GGUF into parts as llama.cpp's gguf-split does (the
// first part every metadata key, every part split.no (u16), split.count
// (u16) and split.tensors.count (i32), the tensors in file order, an equal
// share per part), so tests can open split models without llama.cpp.
#ifndef WASTE_STORAGE_SPLIT_GGUF_TESTING_H_
#define WASTE_STORAGE_SPLIT_GGUF_TESTING_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/env.h"

namespace waste::storage::testing {

// Writes `in` (PREFIX.gguf) as PREFIX-00001-of-0000N.gguf ... (N = `parts`)
// and returns their paths, first part first.
absl::StatusOr<std::vector<std::string>> WriteSplitParts(Env* env, const std::string& in,
                                                         int parts);

}  // namespace waste::storage::testing

#endif  // WASTE_STORAGE_SPLIT_GGUF_TESTING_H_
