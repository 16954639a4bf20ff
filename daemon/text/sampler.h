// Next-token selection from logits: repetition / presence / frequency
// penalties over the last N tokens, then greedy, or temperature sampling
// restricted by top-k, top-p (nucleus) and min-p. Also reports the
// log-probability of the chosen token and of the top-n alternatives.
//
// Deterministic: the same config (seed included), the same history and the
// same logits give the same tokens on every platform. The generator is
// std::mt19937_64 (fully specified by the standard) and uniform floats are
// made here from its bits, not by std::uniform_real_distribution.
//
// Every buffer is sized at construction; Sample() does not allocate.
// Not thread-safe: one Sampler per generation stream.
#ifndef WASTE_DAEMON_TEXT_SAMPLER_H_
#define WASTE_DAEMON_TEXT_SAMPLER_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "daemon/text/vocab.h"

namespace waste::text {

struct SamplerConfig {
  // <= 0 selects greedy decoding (argmax after penalties; lowest id on ties).
  float temperature = 0.0f;
  int32_t top_k = 0;   // 0 = off.
  float top_p = 1.0f;  // 1 = off; keep the smallest set with mass >= top_p.
  float min_p = 0.0f;  // 0 = off; drop tokens with p < min_p * p_max.
  // Penalties over the last `penalty_last_n` accepted tokens (llama.cpp
  // semantics): logit / r if positive, * r if negative; minus
  // count * frequency_penalty + presence_penalty when count > 0.
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t penalty_last_n = 64;
  uint64_t seed = 0;
  // How many alternatives to report with each token (0..kMaxTopLogprobs).
  int32_t top_logprobs = 0;
};

inline constexpr int32_t kMaxTopLogprobs = 20;

struct TokenLogprob {
  TokenId token = kNoToken;
  float logprob = 0.0f;
};

struct SampleResult {
  TokenId token = kNoToken;
  // log p(token) under the model's distribution: log-softmax of the raw
  // logits, before penalties, temperature and truncation.
  float logprob = 0.0f;
  // The most likely tokens under the same distribution, most likely first;
  // top_logprobs entries. Points into the Sampler; valid until the next
  // Sample() call.
  absl::Span<const TokenLogprob> top;
};

class Sampler {
 public:
  // INVALID_ARGUMENT for n_vocab <= 0 or out-of-range settings (negative
  // temperature is allowed and means greedy).
  static absl::StatusOr<Sampler> Create(const SamplerConfig& config, int32_t n_vocab);

  // Picks the next token from `logits` (n_vocab values, not modified) and
  // records it in the penalty history. Non-finite logits are never chosen
  // unless nothing else is.
  SampleResult Sample(absl::Span<const float> logits);

  // Adds tokens to the penalty history without sampling (the prompt).
  void Accept(TokenId token);
  // Clears the history and reseeds the generator.
  void Reset();

  const SamplerConfig& config() const { return config_; }

 private:
  Sampler(const SamplerConfig& config, int32_t n_vocab);
  double Uniform();  // [0, 1), from the top 53 bits of the generator.
  void ApplyPenalties();
  TokenId Argmax() const;
  TokenId SampleFromCandidates();
  void ComputeLogprobs(absl::Span<const float> logits, TokenId chosen, SampleResult* result);

  SamplerConfig config_;
  int32_t n_vocab_;
  std::mt19937_64 rng_;

  std::vector<float> work_;          // Logits after penalties / temperature.
  std::vector<TokenId> candidates_;  // Token ids, reordered by filtering.
  std::vector<float> probs_;         // Per candidate.
  std::vector<TokenId> history_;     // Ring buffer of the last penalty_last_n tokens.
  size_t history_next_ = 0;
  size_t history_size_ = 0;
  std::vector<int32_t> counts_;  // Occurrences in the history, per token.
  std::vector<TokenLogprob> top_;
};

}  // namespace waste::text

#endif  // WASTE_DAEMON_TEXT_SAMPLER_H_
