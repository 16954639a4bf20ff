// An importance matrix: for every weight matrix of a model, the mean of the
// squared activations entering each of its columns over a calibration text.
// Quantizers weigh each column's rounding error by it (see
// kernels::QuantizeRowWeighted), so the columns that see large inputs keep
// their precision.
//
// The file is llama.cpp's legacy imatrix format (what llama-imatrix wrote
// until mid-2025 and what llama-quantize --imatrix still reads), little
// endian, no header:
//
//   int32 n_entries (>= 1)
//   n_entries times:
//     int32 name_length, name bytes (a GGUF tensor name: blk.0.attn_q.weight)
//     int32 ncall       calls the sums cover (llama.cpp: one per batch of
//                       one chunk; here one per chunk, the same thing when
//                       the batch is the context, llama.cpp's default)
//     int32 nval        columns; for a 3-D tensor (routed experts, MLA's
//                       per-head attn_k_b/attn_v_b) n_mat * columns, matrix
//                       by matrix
//     nval float32      mean(x_j^2) * ncall: llama-quantize divides by ncall
//   optional trailer:
//     int32 last_call   chunks of the whole run
//     int32 length, bytes: the calibration text's file name
//
// Plain values; not thread-safe to mutate while read.
#ifndef WASTE_DAEMON_QUALITY_IMATRIX_H_
#define WASTE_DAEMON_QUALITY_IMATRIX_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/env.h"

namespace waste::quality {

struct ImatrixEntry {
  int32_t ncall = 0;
  // As stored: mean of the squared activations times ncall.
  std::vector<float> values;

  // The importance of each column (mean of x_j^2): values / ncall, or the
  // values themselves when ncall is 0 (as llama-quantize reads them).
  std::vector<float> Importance() const;
};

struct ImportanceMatrix {
  // By tensor name; written in name order, so a file's bytes depend only
  // on its contents.
  std::map<std::string, ImatrixEntry> entries;
  int32_t last_call = 0;  // Chunks evaluated.
  std::string dataset;    // The calibration text's name ("" when unknown).

  // The entry of a tensor, or null.
  const ImatrixEntry* Find(std::string_view name) const;
};

// The file's bytes.
std::string EncodeImatrix(const ImportanceMatrix& matrix);

// Parses a file's bytes; `source` names them in errors. Every length and
// count is checked against what is left (INVALID_ARGUMENT, naming the entry
// and the offset); non-finite or negative importances are refused, as
// llama-quantize refuses them. A missing trailer is accepted (older files).
absl::StatusOr<ImportanceMatrix> DecodeImatrix(std::string_view bytes, std::string_view source);

// Reads / writes a file through `env`. Writing goes through a temporary
// file and a rename, so a failure leaves no half-written matrix.
absl::StatusOr<ImportanceMatrix> ReadImatrix(storage::Env* env, const std::string& path);
absl::Status WriteImatrix(storage::Env* env, const std::string& path,
                          const ImportanceMatrix& matrix);

}  // namespace waste::quality

#endif  // WASTE_DAEMON_QUALITY_IMATRIX_H_
