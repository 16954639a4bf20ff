// `wasted quantize IN.gguf OUT.gguf --type TYPE`: rewrites a GGUF model with
// its weight matrices in another ggml type, as llama.cpp's llama-quantize
// does for a single target type.
//
// What is converted (the rest is copied byte for byte):
//   - tensors whose name ends in "weight", with at least 2 dimensions (2-D
//     matrices and 3-D expert stacks: every row is quantized on its own);
//   - except the MoE router (ffn_gate_inp), norms, position/type embeddings
//     and a few recurrent-state tensors, which llama.cpp keeps in full
//     precision too;
//   - and only when the row length (ne0) is a multiple of the target's block
//     size (32 for the legacy quants, 256 for the K-quants). llama.cpp
//     falls back to another quant type for such rows; here they simply keep
//     their type, so a model with n_embd 64 quantized to Q4_K keeps every
//     matrix in F32.
// The output head follows llama.cpp's rule: for targets below 8 bits,
// output.weight (token_embd.weight when the model ties them) becomes Q6_K
// (Q5_K for the IQ1/IQ2/IQ3_XXS targets), or Q8_0 when its rows do not
// divide into 256. llama.cpp's other mixes
// (Q4_K_M's Q6_K attn_v/ffn_down layers, ...) are not reproduced: every
// other matrix, token_embd included, gets the one target type, so files
// are a little smaller than llama-quantize's for the same nominal type.
//
// Source types: F32, F16 and BF16 are converted; an already quantized
// source is refused unless allow_requantize (quality drops twice, as
// llama-quantize warns). Types the kernels cannot decode are copied.
//
// With an importance matrix (imatrix.h: `wasted imatrix`, or llama.cpp's
// llama-imatrix) every matrix that has an entry is quantized by
// kernels::QuantizeRowWeighted with its columns' importances (matrix by
// matrix for 3-D expert stacks): a weighted scale search instead of plain
// rounding; a matrix without an entry (token_embd, an uncollected output
// head) gets the same search with every column equally important. An
// entry whose size is not columns x matrices is an error, as in
// llama-quantize. IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS and IQ2_S need the
// matrix (llama-quantize refuses them without one), and every matrix
// quantized to them needs its entry; as in llama.cpp, token_embd then
// becomes Q2_K (IQ3_S for IQ2_S and IQ3_XXS) and the output head Q5_K,
// since no activation of theirs is ever collected.
//
// Metadata is copied in order; general.file_type is set to llama.cpp's
// LLAMA_FTYPE for the type and general.quantization_version to 2 (ggml's
// GGML_QNT_VERSION). The source's alignment is kept.
//
// Memory stays bounded whatever the model's size: tensors are streamed one
// at a time, in pieces of a few MiB of rows, read through storage::Env. The
// output is written to OUT + ".quantize-tmp" and renamed into place, so a
// failed run leaves no half-written model (and IN may equal OUT).
#ifndef WASTE_DAEMON_QUALITY_QUANTIZE_MODEL_H_
#define WASTE_DAEMON_QUALITY_QUANTIZE_MODEL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/quality/imatrix.h"
#include "storage/env.h"
#include "storage/ggml_types.h"
#include "storage/gguf.h"

namespace waste::quality {

struct QuantizeOptions {
  storage::GgmlType type = storage::GgmlType::kQ8_0;
  // Convert already quantized source tensors (through f32).
  bool allow_requantize = false;
  // Threads quantizing rows; 0: the machine's cores.
  int threads = 0;
  // llama-quantize's --pure: every converted matrix gets `type`, the head
  // and the token embeddings included (no Q6_K/Q5_K head, no Q2_K/IQ3_S
  // embeddings).
  bool pure = false;
  // Column importances per tensor (not owned; null: plain rounding).
  const ImportanceMatrix* imatrix = nullptr;
  // Per-tensor types over every rule above: the first override whose glob
  // (fnmatch: * ? [..]) matches the whole tensor name gives its type, e.g.
  // "blk.*.ffn_down_exps.weight" -> Q4_K, for the mixes real large-model
  // files use. (llama-quantize's --tensor-type takes a regex instead.)
  struct TensorTypeOverride {
    std::string glob;
    storage::GgmlType type;
  };
  std::vector<TensorTypeOverride> tensor_types;
};

// "GLOB=TYPE" (the last '=' splits) as --tensor-type takes it;
// INVALID_ARGUMENT naming the problem.
absl::StatusOr<QuantizeOptions::TensorTypeOverride> ParseTensorTypeOverride(std::string_view flag);

// What QuantizeModel did.
struct QuantizeReport {
  int64_t tensors = 0;    // In the file.
  int64_t converted = 0;  // Written in the target type.
  int64_t kept = 0;       // Copied as they were.
  // Matrices kept only because their rows do not divide into blocks.
  std::vector<std::string> kept_ragged;
  // With an importance matrix: matrices converted with their entry, and
  // the names of those converted without one (searched with every column
  // equally important).
  int64_t weighted = 0;
  std::vector<std::string> unweighted;
  uint64_t in_bytes = 0;  // File sizes.
  uint64_t out_bytes = 0;
};

// Target types `wasted quantize` writes: q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k
// q4_k q5_k q6_k iq4_nl iq4_xs iq3_s iq3_xxs iq2_s iq2_xs iq2_xxs iq1_m
// iq1_s mxfp4 f16 bf16 (case-insensitive). mxfp4 is llama.cpp's MXFP4_MOE
// (ftype 38): expert stacks MXFP4, the other matrices Q8_0 (unless --pure). INVALID_ARGUMENT
// listing them otherwise. Without an importance matrix the 2-4-bit types use a plain scale search
// per block (kernels::QuantizeRow), so their error is larger than llama.cpp's imatrix files of the
// same type.
absl::StatusOr<storage::GgmlType> ParseQuantizeType(std::string_view name);

// llama.cpp's LLAMA_FTYPE for a file whose matrices are `type`: Q8_0 -> 7,
// Q4_0 -> 2, Q4_K -> 14 (Q4_K_S), Q5_K -> 16 (Q5_K_S), Q6_K -> 18, Q2_K -> 10,
// Q3_K -> 11 (Q3_K_S), IQ4_NL -> 25, IQ4_XS -> 30, IQ2_XXS -> 19, F16 -> 1,
// BF16 -> 32, ...
// nullopt for types quantize does not write.
std::optional<uint32_t> LlamaFileType(storage::GgmlType type);

// Whether `tensor` is one of the matrices the quantizer converts by name
// and rank (the row-length and source-type conditions come on top).
bool IsQuantizableWeight(const storage::TensorInfo& tensor);

// Converts the model at `in` into `out`. NOT_FOUND when `in` is missing,
// the reader's error for a bad file, INVALID_ARGUMENT for a quantized
// source without allow_requantize; write errors name `out`.
absl::StatusOr<QuantizeReport> QuantizeModel(storage::Env* env, const std::string& in,
                                             const std::string& out,
                                             const QuantizeOptions& options);

// `wasted quantize`: returns the process exit code (0, 1 for a failed
// conversion, 2 for bad usage).
int RunQuantize(const std::vector<std::string>& args);

}  // namespace waste::quality

#endif  // WASTE_DAEMON_QUALITY_QUANTIZE_MODEL_H_
