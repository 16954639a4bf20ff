// The shape of a synthetic model: the metadata and tensor list llama.cpp
// expects for an architecture (src/llama-arch.cpp key and tensor names,
// shapes as src/llama-model.cpp creates them), with how to fill each tensor.
// Pure computation, no I/O: mkmodel streams the data, tests check the spec.
#ifndef WASTE_DAEMON_TOOLS_SYNTHETIC_MODEL_H_
#define WASTE_DAEMON_TOOLS_SYNTHETIC_MODEL_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/tools/mkmodel.h"
#include "storage/ggml_types.h"
#include "storage/gguf.h"

namespace waste::tools {

// How a tensor's values are drawn.
enum class WeightInit {
  kNormal,  // normal(0, scale), in the tensor's type.
  kOnes,    // Norm weights: all 1.
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;  // ggml order, shape[0] innermost.
  storage::GgmlType type = storage::GgmlType::kF32;
  WeightInit init = WeightInit::kNormal;
  float scale = 0;
};

struct ModelSpec {
  std::string arch;                                                  // general.architecture
  std::vector<std::pair<std::string, storage::GgufValue>> metadata;  // Without tokenizer.*
  std::vector<TensorSpec> tensors;                                   // In file order.
};

// The options with every 0/-1 "default" replaced by its value, checked for
// consistency (INVALID_ARGUMENT naming the flag). `vocab` is the
// tokenizer's size, which options.vocab must match when it is set.
absl::StatusOr<MkModelOptions> ResolveOptions(const MkModelOptions& options, int64_t vocab);

// The spec for already resolved options.
ModelSpec BuildModelSpec(const MkModelOptions& resolved);

// The type a matrix with rows of `ne0` elements gets when `requested` is
// asked for, falling back as llama.cpp's quantizer does when a row is not a
// whole number of blocks: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, and F16
// when even 32-element blocks do not fit.
storage::GgmlType MatrixType(storage::GgmlType requested, int64_t ne0);

// llama.cpp's general.file_type (enum llama_ftype) for a weight type.
uint32_t FileTypeFor(storage::GgmlType type);

// "llama", "qwen2", ... as the --arch flag spells it; nullopt-like false on
// an unknown name.
bool ParseSyntheticArch(const std::string& name, SyntheticArch* arch);
const char* SyntheticArchFlagName(SyntheticArch arch);

}  // namespace waste::tools

#endif  // WASTE_DAEMON_TOOLS_SYNTHETIC_MODEL_H_
