// `wasted perplexity MODEL TEXT --kl-base BASE`: how far a quantized model's
// next-token distributions are from a reference model's (usually the F32 or
// F16 file it was made from), on the positions perplexity scores, as
// llama-perplexity --kl-divergence reports it:
//   KL(p_base || p_model) = sum_v p_base(v) (log p_base(v) - log p_model(v))
// per scored position, its mean and standard error, the share of positions
// where both models' most likely tokens agree, and both perplexities.
//
// The two models run side by side, chunk by chunk and a step of positions
// at a time (memory: two steps of logits), on the same tokens; they must
// share the tokenizer (INVALID_ARGUMENT when the texts tokenize
// differently). Non-overlapping chunks only (no --stride).
#ifndef WASTE_DAEMON_QUALITY_KL_DIVERGENCE_H_
#define WASTE_DAEMON_QUALITY_KL_DIVERGENCE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "daemon/kernels/thread_pool.h"
#include "daemon/quality/perplexity.h"

namespace waste::quality {

struct KlDivergenceResult {
  int64_t n_chunks = 0;
  int64_t n_scored = 0;
  double kl_mean = 0;
  double kl_error = 0;    // Standard error of the mean.
  double kl_max = 0;      // The largest of one position.
  double top1_agree = 0;  // Share of positions with the same argmax.
  double ppl = 0;         // Of the model.
  double base_ppl = 0;    // Of the reference.
};

// Called after each chunk with its 1-based index and the running mean KL.
using KlChunkCallback = std::function<void(int64_t chunk, double kl_mean)>;

// KL divergence of `model` from `base` on the text both were loaded with.
// options.stride must be 0 or n_ctx.
absl::StatusOr<KlDivergenceResult> ComputeKlDivergence(const Evaluation& base,
                                                       const Evaluation& model,
                                                       kernels::ThreadPool* pool,
                                                       const PerplexityOptions& options,
                                                       const KlChunkCallback& on_chunk = nullptr);

}  // namespace waste::quality

#endif  // WASTE_DAEMON_QUALITY_KL_DIVERGENCE_H_
