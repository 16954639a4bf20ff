// `wasted imatrix MODEL.gguf TEXT -o FILE [--ctx N] [--chunks N]`: runs a
// model over a calibration text and writes, for every weight matrix, the
// mean of the squared activations entering each of its columns (the
// importance matrix llama.cpp's llama-imatrix computes, in its legacy file
// format: imatrix.h).
//
// The text is cut into chunks of n_ctx tokens exactly as perplexity does
// (perplexity.h; llama-imatrix cuts them the same way), every token of
// every chunk is evaluated and its products' inputs are summed:
//   - a dense matrix: every row (token) of its input;
//   - routed experts (ffn_{gate,up,down}_exps, 3-D): per expert only the
//     tokens routed to it; nval = n_expert * columns, expert by expert.
//     An expert no token reached gets importance 1 in every column (and a
//     warning): llama.cpp of early 2025 dropped the whole tensor then, later
//     versions store 1 the same way;
//   - MLA's per-head attn_k_b / attn_v_b (3-D): per head, nval = n_head *
//     columns, which is what llama-quantize looks for in a 3-D tensor.
// Only tensors named blk.* are kept, plus output.weight with
// include_output (llama-imatrix's --process-output); a tensor's ncall is the
// number of chunks it was used in.
#ifndef WASTE_DAEMON_QUALITY_IMATRIX_COLLECTOR_H_
#define WASTE_DAEMON_QUALITY_IMATRIX_COLLECTOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/model/forward.h"
#include "daemon/model/model.h"
#include "daemon/quality/imatrix.h"
#include "storage/env.h"
#include "storage/gguf.h"

namespace waste::quality {

// Sums the squares of every product's input, per tensor column, for a
// Forward (set_product_observer). Not thread-safe: the Forward's thread.
class ImatrixCollector final : public model::ProductObserver {
 public:
  // `gguf` and `model` (bound to it) must outlive the collector.
  ImatrixCollector(const storage::GgufFile& gguf, const model::Model& model, bool include_output);

  void OnProduct(memory::ChunkId chunk, uint64_t offset, const kernels::WeightView& w,
                 const float* x, int64_t x_stride, int64_t n) override;

  // Closes a chunk of text: every tensor used in it counts one more call.
  void EndChunk();

  // The matrix of what was seen so far (every tensor used at least once).
  // `dataset` goes in the file's trailer. `warnings` (may be null) gets a
  // line per tensor with matrices no token reached.
  ImportanceMatrix Result(const std::string& dataset, std::vector<std::string>* warnings) const;

  // Products whose matrix could not be traced to a tensor of the file
  // (should stay 0; counted rather than fatal).
  int64_t untraced() const { return untraced_; }

 private:
  struct Sums {
    std::string name;
    int64_t cols = 0;
    int64_t n_mat = 1;
    std::vector<double> sum;     // [n_mat * cols]
    std::vector<int64_t> count;  // [n_mat]: rows seen per matrix.
    int32_t ncall = 0;
    bool used_in_chunk = false;
  };
  struct Target {
    int sums = -1;  // Index into sums_; -1: not collected.
    int64_t matrix = 0;
  };
  Target Trace(memory::ChunkId chunk, uint64_t offset, const kernels::WeightView& w);

  const storage::GgufFile& gguf_;
  const model::Model& model_;
  bool include_output_;
  std::vector<Sums> sums_;
  std::unordered_map<std::string, int> sums_by_name_;
  // (chunk << 40 | offset) -> where its products go.
  std::unordered_map<uint64_t, Target> traced_;
  int64_t untraced_ = 0;
};

struct ImatrixOptions {
  int64_t n_ctx = 512;      // llama-imatrix's default.
  int64_t max_chunks = -1;  // < 0: all.
  int threads = 0;          // 0: the machine's cores.
  bool include_output = false;
};

struct ImatrixRun {
  ImportanceMatrix matrix;
  int64_t n_tokens = 0;
  int64_t n_chunks = 0;
  double ppl = 0;  // Of the text, as wasted perplexity computes it.
  std::vector<std::string> warnings;
};

// Loads the model at `model_path`, runs it over the text at `text_path` and
// returns its importance matrix (the dataset is the text's file name).
absl::StatusOr<ImatrixRun> ComputeImatrix(storage::Env* env, const std::string& model_path,
                                          const std::string& text_path,
                                          const ImatrixOptions& options);

// `wasted imatrix`: returns the process exit code (0, 1 for a failed run, 2
// for bad usage).
int RunImatrix(const std::vector<std::string>& args);

}  // namespace waste::quality

#endif  // WASTE_DAEMON_QUALITY_IMATRIX_COLLECTOR_H_
