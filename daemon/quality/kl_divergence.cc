#include "daemon/quality/kl_divergence.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/model/forward.h"

namespace waste::quality {
namespace {

// log softmax of one position's logits (float differences, double sum, as
// perplexity's NLL).
void LogSoftmax(const float* logits, int64_t n, std::vector<double>* out) {
  const float max = *std::max_element(logits, logits + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(logits[i] - max);
  const double log_sum = std::log(sum);
  out->resize(n);
  for (int64_t i = 0; i < n; ++i) (*out)[i] = static_cast<double>(logits[i] - max) - log_sum;
}

// One model's side of the comparison.
struct Side {
  Side(const Evaluation& eval, kernels::ThreadPool* pool, const PerplexityOptions& options)
      : state(*eval.model, options.n_ctx, options.kv_type),
        forward(eval.model.get(), eval.store.get(), pool),
        logits(model::kDefaultStepTokens * eval.model->hparams().n_vocab) {}
  model::SequenceState state;
  model::Forward forward;
  std::vector<float> logits;
};

}  // namespace

absl::StatusOr<KlDivergenceResult> ComputeKlDivergence(const Evaluation& base,
                                                       const Evaluation& model,
                                                       kernels::ThreadPool* pool,
                                                       const PerplexityOptions& options,
                                                       const KlChunkCallback& on_chunk) {
  const int64_t n_ctx = options.n_ctx;
  if (options.stride != 0 && options.stride != n_ctx) {
    return absl::InvalidArgumentError("--kl-base works on non-overlapping chunks: drop --stride");
  }
  if (n_ctx < 3) return absl::InvalidArgumentError("--ctx must be at least 3");
  if (base.tokens != model.tokens || base.bos != model.bos) {
    return absl::InvalidArgumentError(
        "the two models tokenize the text differently: --kl-base needs the model the file was "
        "made from (the same vocabulary)");
  }
  const int64_t n_vocab = model.model->hparams().n_vocab;
  if (base.model->hparams().n_vocab != n_vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocabularies differ: ", base.model->hparams().n_vocab, " vs ", n_vocab));
  }
  const std::vector<int32_t>& tokens = model.tokens;
  const int64_t n_tokens = static_cast<int64_t>(tokens.size());
  if (n_tokens < 2 * n_ctx) {
    return absl::InvalidArgumentError(absl::StrCat("the text tokenizes to only ", n_tokens,
                                                   " tokens; a context of ", n_ctx, " needs ",
                                                   2 * n_ctx));
  }
  int64_t n_chunk = n_tokens / n_ctx;
  if (options.max_chunks >= 0) n_chunk = std::min(n_chunk, options.max_chunks);
  const int64_t first_scored = n_ctx / 2;

  Side a(base, pool, options), b(model, pool, options);
  KlDivergenceResult result;
  double kl_sum = 0, kl2_sum = 0, nll_a = 0, nll_b = 0;
  int64_t agree = 0;
  std::vector<int32_t> window(n_ctx);
  std::vector<double> la, lb;
  for (int64_t chunk = 0; chunk < n_chunk; ++chunk) {
    const int64_t start = chunk * n_ctx;
    std::copy(tokens.begin() + start, tokens.begin() + start + n_ctx, window.begin());
    if (model.bos >= 0) window[0] = model.bos;
    for (Side* s : {&a, &b}) {
      s->state.Truncate(0);
      RETURN_IF_ERROR(s->forward.Run(&s->state, std::span(window).first(first_scored),
                                     s->logits.data(),
                                     /*all_logits=*/false, /*prompt=*/true));
    }
    for (int64_t p = first_scored; p < n_ctx - 1; p += model::kDefaultStepTokens) {
      const int64_t n = std::min<int64_t>(model::kDefaultStepTokens, n_ctx - 1 - p);
      for (Side* s : {&a, &b}) {
        RETURN_IF_ERROR(s->forward.Run(&s->state, std::span(window).subspan(p, n), s->logits.data(),
                                       /*all_logits=*/true, /*prompt=*/true));
      }
      for (int64_t r = 0; r < n; ++r) {
        const float* xa = &a.logits[r * n_vocab];
        const float* xb = &b.logits[r * n_vocab];
        LogSoftmax(xa, n_vocab, &la);
        LogSoftmax(xb, n_vocab, &lb);
        double kl = 0;
        for (int64_t v = 0; v < n_vocab; ++v) kl += std::exp(la[v]) * (la[v] - lb[v]);
        kl = std::max(kl, 0.0);  // Rounding can leave a tiny negative.
        kl_sum += kl;
        kl2_sum += kl * kl;
        result.kl_max = std::max(result.kl_max, kl);
        const int32_t target = tokens[start + p + r + 1];
        nll_a -= la[target];
        nll_b -= lb[target];
        agree += std::max_element(xa, xa + n_vocab) - xa == std::max_element(xb, xb + n_vocab) - xb;
        ++result.n_scored;
      }
    }
    ++result.n_chunks;
    if (on_chunk) on_chunk(chunk + 1, kl_sum / result.n_scored);
  }
  const double count = static_cast<double>(result.n_scored);
  result.kl_mean = kl_sum / count;
  const double variance = kl2_sum / count - result.kl_mean * result.kl_mean;
  if (result.n_scored > 1 && variance > 0) result.kl_error = std::sqrt(variance / (count - 1));
  result.top1_agree = agree / count;
  result.base_ppl = std::exp(nll_a / count);
  result.ppl = std::exp(nll_b / count);
  return result;
}

}  // namespace waste::quality
