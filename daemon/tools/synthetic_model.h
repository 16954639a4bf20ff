// A synthetic GGUF model: llama.cpp's metadata keys and tensor names for an
// architecture, filled with seeded random weights, so that loading,
// streaming and the memory plan can be tested on models of any shape and
// size without downloading one. `wasted mkmodel` (mkmodel.h) is its command;
// tests call WriteSyntheticModel directly.
//
// The spec (BuildModelSpec: src/llama-arch.cpp key and tensor names, shapes
// as src/llama-model.cpp creates them, and how to fill each tensor) is pure
// computation, no I/O; WriteSyntheticModel (synthetic_writer.cc) streams it.
//
// The file is streamed through storage::GgufWriter: each tensor's rows are
// generated a bounded chunk at a time (by a few worker threads, written in
// order by the caller's thread), so memory stays at a few tens of MB whatever
// the model's size. Values are normal(0, 1/sqrt(fan_in)), drawn a block at a
// time from a small pool of blocks quantized once per (type, scale), so that
// no per-weight quantizer runs and writing is bound by the disk. The output
// is a function of the options and the seed alone: every row picks its
// blocks from its own PRNG stream, keyed by the seed, the tensor and the row,
// independent of chunking and threads.
#ifndef WASTE_DAEMON_TOOLS_SYNTHETIC_MODEL_H_
#define WASTE_DAEMON_TOOLS_SYNTHETIC_MODEL_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/env.h"
#include "storage/ggml_types.h"
#include "storage/gguf.h"

namespace waste::tools {

// Architectures mkmodel writes. kMixtral is written as llama.cpp names it:
// general.architecture "llama" with experts. kGptOss is "gpt-oss", kGlm4Moe
// "glm4moe" (GLM-4.5: one multi-token-prediction block after `layers`);
// kGemma, kGemma2, kGemma3 "gemma", "gemma2", "gemma3" (the output head tied
// to the embeddings, as Gemma's files have it).
enum class SyntheticArch {
  kLlama,
  kQwen2,
  kQwen3,
  kMixtral,
  kQwen3Moe,
  kDeepseek2,
  kGptOss,
  kGlm4Moe,
  kGemma,
  kGemma2,
  kGemma3
};

struct MkModelOptions {
  SyntheticArch arch = SyntheticArch::kLlama;
  std::string out;
  int64_t dim = 256;
  int64_t layers = 4;
  int64_t heads = 8;
  int64_t kv_heads = 0;  // 0: = heads.
  int64_t head_dim = 0;  // 0: dim / heads. deepseek2: qk_nope and v head dim.
  int64_t ffn = 0;       // 0: a multiple of 32 near 8/3 * dim.
  int64_t vocab = 0;     // 0: the tokenizer's size.
  int64_t ctx = 2048;
  int64_t experts = 0;          // MoE archs: 0 means 8.
  int64_t experts_used = 0;     // 0 means 2.
  int64_t expert_ffn = 0;       // 0: ffn / 2 (mixtral: ffn).
  int64_t shared_experts = -1;  // deepseek2, glm4moe: -1 means 1.
  int64_t dense_layers = -1;    // deepseek2, glm4moe leading dense blocks: -1 means 1.
  int64_t q_lora_rank = -1;     // deepseek2: -1 means dim / 2; 0 writes attn_q.
  int64_t kv_lora_rank = 0;     // deepseek2: 0 means dim / 4.
  // deepseek2 qk_rope_head_dim, glm4moe's rotated dims (partial RoPE): 0
  // means head_dim / 2.
  int64_t rope_dim = 0;
  bool qk_norm = true;  // glm4moe: Q/K norms, as GLM-4.5 (-Air has none).
  // deepseek2: MLA as converters wrote it before llama.cpp's split (spring
  // 2025): one attn_kv_b, key/value_length per head, head_count_kv = heads.
  bool mla_fused = false;
  // gpt-oss (as gpt-oss-20b/120b), gemma2, gemma3: 0 means 128.
  int64_t sliding_window = 0;
  storage::GgmlType type = storage::GgmlType::kQ8_0;
  uint64_t seed = 1;
  std::string tokenizer_from;  // Copy tokenizer.* from this GGUF.
  // tokenizer.chat_template, replacing one copied (empty: none, or the copy's).
  std::string chat_template;
  int threads = 0;  // Workers; 0: the machine's cores.
};

// What WriteSyntheticModel wrote.
struct MkModelResult {
  std::string arch;  // general.architecture
  int64_t tensors = 0;
  int64_t params = 0;
  uint64_t file_bytes = 0;
  int64_t vocab = 0;
};

// Writes the model to options.out (through a temporary file renamed into
// place, so a failed run leaves no half-written model). Invalid shapes
// (head_dim * heads too large, experts_used > experts, ...) are
// INVALID_ARGUMENT naming the option.
absl::StatusOr<MkModelResult> WriteSyntheticModel(const MkModelOptions& options, storage::Env* env);

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
// whole number of blocks: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K,
// Q3_K, IQ4_XS and the IQ1/IQ2/IQ3 types -> IQ4_NL, and F16 when even
// 32-element blocks do not fit.
storage::GgmlType MatrixType(storage::GgmlType requested, int64_t ne0);

// llama.cpp's general.file_type (enum llama_ftype) for a weight type.
uint32_t FileTypeFor(storage::GgmlType type);

// "llama", "qwen2", ... as the --arch flag spells it; nullopt-like false on
// an unknown name.
bool ParseSyntheticArch(const std::string& name, SyntheticArch* arch);
const char* SyntheticArchFlagName(SyntheticArch arch);

}  // namespace waste::tools

#endif  // WASTE_DAEMON_TOOLS_SYNTHETIC_MODEL_H_
