#include "daemon/text/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace waste::text {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// NaN never wins; +inf is clamped so that exp(x - max) stays defined.
float Finite(float x) {
  if (std::isnan(x)) return kNegInf;
  return std::min(x, std::numeric_limits<float>::max());
}

}  // namespace

absl::StatusOr<Sampler> Sampler::Create(const SamplerConfig& config, int32_t n_vocab) {
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("sampler: ", parts...));
  };
  if (n_vocab <= 0) return bad("vocabulary size must be positive, got ", n_vocab);
  if (std::isnan(config.temperature)) return bad("temperature is NaN");
  if (config.top_k < 0) return bad("top_k must be >= 0, got ", config.top_k);
  if (!(config.top_p > 0.0f && config.top_p <= 1.0f)) {
    return bad("top_p must be in (0, 1], got ", config.top_p);
  }
  if (!(config.min_p >= 0.0f && config.min_p <= 1.0f)) {
    return bad("min_p must be in [0, 1], got ", config.min_p);
  }
  if (!(config.repetition_penalty > 0.0f)) {
    return bad("repetition_penalty must be > 0, got ", config.repetition_penalty);
  }
  if (!std::isfinite(config.presence_penalty) || !std::isfinite(config.frequency_penalty)) {
    return bad("presence and frequency penalties must be finite");
  }
  if (config.penalty_last_n < 0) {
    return bad("penalty_last_n must be >= 0, got ", config.penalty_last_n);
  }
  if (config.top_logprobs < 0 || config.top_logprobs > kMaxTopLogprobs) {
    return bad("top_logprobs must be in [0, ", kMaxTopLogprobs, "], got ", config.top_logprobs);
  }
  return Sampler(config, n_vocab);
}

Sampler::Sampler(const SamplerConfig& config, int32_t n_vocab)
    : config_(config),
      n_vocab_(n_vocab),
      rng_(config.seed),
      work_(n_vocab),
      candidates_(n_vocab),
      probs_(n_vocab),
      history_(config.penalty_last_n),
      counts_(n_vocab, 0),
      top_(std::min(config.top_logprobs, n_vocab)) {}

double Sampler::Uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

void Sampler::Accept(TokenId token) {
  if (token < 0 || token >= n_vocab_ || history_.empty()) return;
  if (history_size_ == history_.size()) {
    --counts_[history_[history_next_]];  // Evict the oldest.
  } else {
    ++history_size_;
  }
  history_[history_next_] = token;
  ++counts_[token];
  history_next_ = (history_next_ + 1) % history_.size();
}

void Sampler::Reset() {
  std::fill(counts_.begin(), counts_.end(), 0);
  history_next_ = 0;
  history_size_ = 0;
  rng_.seed(config_.seed);
}

void Sampler::ApplyPenalties() {
  const bool active = config_.repetition_penalty != 1.0f || config_.presence_penalty != 0.0f ||
                      config_.frequency_penalty != 0.0f;
  if (!active) return;
  // Penalise each distinct token once: mark visited tokens by negating
  // their count, then restore.
  for (size_t i = 0; i < history_size_; ++i) {
    const TokenId t = history_[i];
    const int32_t count = counts_[t];
    if (count <= 0) continue;
    float& logit = work_[t];
    logit = logit > 0 ? logit / config_.repetition_penalty : logit * config_.repetition_penalty;
    logit -= static_cast<float>(count) * config_.frequency_penalty + config_.presence_penalty;
    counts_[t] = -count;
  }
  for (size_t i = 0; i < history_size_; ++i) {
    const TokenId t = history_[i];
    if (counts_[t] < 0) counts_[t] = -counts_[t];
  }
}

TokenId Sampler::Argmax() const {
  TokenId best = 0;
  for (TokenId i = 1; i < n_vocab_; ++i) {
    if (work_[i] > work_[best]) best = i;
  }
  return best;
}

TokenId Sampler::SampleFromCandidates() {
  // Candidates: every token with a finite logit.
  size_t n = 0;
  for (TokenId i = 0; i < n_vocab_; ++i) {
    if (work_[i] != kNegInf) candidates_[n++] = i;
  }
  if (n == 0) return Argmax();
  // Strict order (logit desc, id asc) so that the kept set and its order
  // do not depend on the standard library's sort algorithm.
  auto higher = [this](TokenId a, TokenId b) {
    return work_[a] > work_[b] || (work_[a] == work_[b] && a < b);
  };
  const auto begin = candidates_.begin();
  if (config_.top_k > 0 && static_cast<size_t>(config_.top_k) < n) {
    std::nth_element(begin, begin + config_.top_k, begin + n, higher);
    n = config_.top_k;
  }
  std::sort(begin, begin + n, higher);

  // top-p and min-p act on the untempered distribution (llama.cpp's
  // default order: penalties, top-k, top-p, min-p, temperature).
  const float max_logit = work_[candidates_[0]];
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    probs_[i] = std::exp(work_[candidates_[i]] - max_logit);
    sum += probs_[i];
  }
  if (config_.top_p < 1.0f) {
    double cumulative = 0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      cumulative += probs_[i] / sum;
      if (cumulative >= config_.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
  }
  if (config_.min_p > 0.0f) {
    // probs_[0] is the maximum, exp(0) = 1.
    size_t keep = 1;
    while (keep < n && probs_[keep] >= config_.min_p) ++keep;
    n = keep;
  }

  const float inv_temperature = 1.0f / config_.temperature;
  double total = 0;
  for (size_t i = 0; i < n; ++i) {
    probs_[i] = std::exp((work_[candidates_[i]] - max_logit) * inv_temperature);
    total += probs_[i];
  }
  const double target = Uniform() * total;
  double cumulative = 0;
  for (size_t i = 0; i < n; ++i) {
    cumulative += probs_[i];
    if (target < cumulative) return candidates_[i];
  }
  return candidates_[n - 1];  // Rounding left target at the very top.
}

void Sampler::ComputeLogprobs(absl::Span<const float> logits, TokenId chosen,
                              SampleResult* result) {
  float max_logit = kNegInf;
  for (float x : logits) max_logit = std::max(max_logit, Finite(x));
  double sum = 0;
  if (max_logit != kNegInf) {
    for (float x : logits) sum += std::exp(static_cast<double>(Finite(x)) - max_logit);
  }
  const double log_z = max_logit + std::log(sum);
  auto logprob = [&](TokenId t) {
    return max_logit == kNegInf ? kNegInf : static_cast<float>(Finite(logits[t]) - log_z);
  };
  result->logprob = logprob(chosen);

  // Top-n by insertion into a short sorted list (n <= kMaxTopLogprobs).
  size_t filled = 0;
  for (TokenId t = 0; t < n_vocab_ && !top_.empty(); ++t) {
    const float x = Finite(logits[t]);
    if (filled == top_.size() && !(x > Finite(logits[top_[filled - 1].token]))) continue;
    size_t pos = filled < top_.size() ? filled++ : filled - 1;
    while (pos > 0 && x > Finite(logits[top_[pos - 1].token])) {
      top_[pos] = top_[pos - 1];
      --pos;
    }
    top_[pos].token = t;
  }
  for (size_t i = 0; i < filled; ++i) top_[i].logprob = logprob(top_[i].token);
  result->top = absl::MakeConstSpan(top_.data(), filled);
}

SampleResult Sampler::Sample(absl::Span<const float> logits) {
  WCHECK(logits.size() == static_cast<size_t>(n_vocab_))
      << "got " << logits.size() << " logits for a vocabulary of " << n_vocab_;
  for (TokenId i = 0; i < n_vocab_; ++i) work_[i] = Finite(logits[i]);
  ApplyPenalties();
  SampleResult result;
  result.token = config_.temperature <= 0.0f ? Argmax() : SampleFromCandidates();
  ComputeLogprobs(logits, result.token, &result);
  Accept(result.token);
  return result;
}

}  // namespace waste::text
