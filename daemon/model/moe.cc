#include "daemon/model/moe.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "daemon/kernels/ops/ops.h"
#include "daemon/model/chunk_lease.h"
#include "daemon/model/forward.h"
#include "storage/status_macros.h"

namespace waste::model {
namespace {

namespace ops = kernels::ops;
using internal::ChunkLease;

constexpr float kExcluded = -std::numeric_limits<float>::infinity();

// Index of the largest of v[0..n) (the lowest index on ties).
int64_t ArgMax(const float* v, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (v[i] > v[best]) best = i;
  }
  return best;
}

// Keeps only the n_group_used groups whose two best scores sum highest.
void LimitGroups(const MoeParams& moe, float* select) {
  const int64_t per_group = moe.n_expert / moe.n_group;
  // Group scores fit on the stack: DeepSeek-V3 has 8 groups; cap at 64.
  constexpr int64_t kMaxGroups = 64;
  float score[kMaxGroups];
  const int64_t groups = std::min(moe.n_group, kMaxGroups);
  for (int64_t g = 0; g < groups; ++g) {
    const float* s = select + g * per_group;
    float first = kExcluded, second = kExcluded;
    for (int64_t i = 0; i < per_group; ++i) {
      if (s[i] > first) {
        second = first;
        first = s[i];
      } else if (s[i] > second) {
        second = s[i];
      }
    }
    score[g] = first + second;
  }
  bool keep[kMaxGroups] = {};
  for (int64_t k = 0; k < moe.n_group_used; ++k) {
    const int64_t g = ArgMax(score, groups);
    keep[g] = true;
    score[g] = kExcluded;
  }
  for (int64_t g = 0; g < groups; ++g) {
    if (!keep[g]) std::fill(select + g * per_group, select + (g + 1) * per_group, kExcluded);
  }
}

}  // namespace

void RouteToken(const MoeParams& moe, float* logits, const float* bias, float* select, int32_t* ids,
                float* weights) {
  const int64_t n = moe.n_expert;
  float* probs = logits;
  if (moe.gating == ExpertGating::kSoftmax) {
    ops::Softmax(probs, n);
  } else {
    for (int64_t i = 0; i < n; ++i) probs[i] = 1.0f / (1.0f + std::exp(-probs[i]));
  }
  for (int64_t i = 0; i < n; ++i) select[i] = bias != nullptr ? probs[i] + bias[i] : probs[i];
  if (moe.n_group > 1) LimitGroups(moe, select);
  float sum = 0;
  for (int64_t k = 0; k < moe.n_expert_used; ++k) {
    const int64_t e = ArgMax(select, n);
    select[e] = kExcluded;
    ids[k] = static_cast<int32_t>(e);
    weights[k] = probs[e];
    sum += probs[e];
  }
  for (int64_t k = 0; k < moe.n_expert_used; ++k) {
    if (moe.norm_weights) weights[k] /= sum;
    if (moe.weights_scale != 0) weights[k] *= moe.weights_scale;
  }
}

absl::Status Forward::MoeFeedForward(SequenceState* s, const LayerTensors& layer, int64_t l,
                                     int64_t n) {
  const HParams& hp = model_->hparams();
  const MoeParams& moe = hp.moe;
  const int64_t d = hp.n_embd, k = moe.n_expert_used, ff = moe.n_ff_exp;
  ChunkLease trunk(store_, layer.ffn_chunk);
  RETURN_IF_ERROR(trunk.Acquire());
  const uint8_t* slot = trunk.slot();
  kernels::Scratch* scratch = &s->matvec_scratch_;
  for (int64_t b = 0; b < n; ++b) {
    ops::RmsNorm(&s->x_[b * d], layer.ffn_norm.F32(slot), d, hp.rms_eps, &s->xb_[b * d]);
  }

  // Route every token, then order the (expert, token) pairs by expert: each
  // expert is then read once and applied to all of its tokens, and every
  // token sums its experts in id order whatever the batch.
  RETURN_IF_ERROR(kernels::MatMul(layer.router.View(slot), s->xb_.data(), d, n, s->router_.data(),
                                  moe.n_expert, pool_, scratch));
  const float* bias = layer.expert_bias.present ? layer.expert_bias.F32(slot) : nullptr;
  for (int64_t b = 0; b < n; ++b) {
    RouteToken(moe, &s->router_[b * moe.n_expert], bias, s->select_.data(), &s->route_ids_[b * k],
               &s->route_weights_[b * k]);
    for (int64_t j = 0; j < k; ++j) {
      s->routes_[b * k + j] = {s->route_ids_[b * k + j], static_cast<int32_t>(b),
                               s->route_weights_[b * k + j]};
    }
  }
  // Score the previous layer's guess against the actual routing.
  if (s->lookahead_layer_ == l && n == 1) {
    ++moe_stats_.lookahead_layers;
    moe_stats_.lookahead_routed += k;
    for (int64_t j = 0; j < k; ++j) {
      moe_stats_.lookahead_hits +=
          std::count(s->route_ids_.begin(), s->route_ids_.begin() + k, s->lookahead_ids_[j]);
    }
  }
  s->lookahead_layer_ = -1;
  const auto routes = s->routes_.begin(), routes_end = routes + n * k;
  std::sort(routes, routes_end, [](const ExpertRoute& a, const ExpertRoute& b) {
    return a.expert != b.expert ? a.expert < b.expert : a.token < b.token;
  });
  size_t n_chunks = 0;
  for (auto r = routes; r != routes_end; ++r) {
    if (r == routes || r->expert != (r - 1)->expert) {
      s->expert_chunks_[n_chunks++] = layer.experts[r->expert].chunk;
    }
  }
  const size_t n_experts = n_chunks;
  // Then the next layer's predicted experts (decode with lookahead on)...
  if (router_lookahead_ && n == 1 && l + 1 < hp.n_layer && hp.IsMoeLayer(l + 1)) {
    RETURN_IF_ERROR(PredictNextExperts(s, l));
    const LayerTensors& next = model_->layers()[l + 1];
    for (int64_t j = 0; j < k; ++j) {
      s->expert_chunks_[n_chunks++] = next.experts[s->lookahead_ids_[j]].chunk;
    }
  }
  // ...then the next layer's blocks, so the store knows what follows.
  if (l + 1 < hp.n_layer) {
    const LayerTensors& next = model_->layers()[l + 1];
    s->expert_chunks_[n_chunks++] = next.attn_chunk;
    s->expert_chunks_[n_chunks++] = next.ffn_chunk;
  }
  store_->Prefetch(std::span<const cache::ChunkId>(s->expert_chunks_.data(), n_chunks));
  moe_stats_.moe_tokens += n;
  moe_stats_.routed += n * k;

  // The shared expert needs no read: it runs while the experts load.
  float* out = s->moe_out_.data();
  if (layer.gate_shexp.present) {
    RETURN_IF_ERROR(SwiGluFfn(s, slot, layer.gate_shexp, layer.up_shexp, layer.down_shexp, n));
    if (layer.gate_inp_shexp.present) {  // qwen2moe: a sigmoid gate per token.
      const float* gw = layer.gate_inp_shexp.F32(slot);
      for (int64_t b = 0; b < n; ++b) {
        float g = 0;
        for (int64_t i = 0; i < d; ++i) g += gw[i] * s->xb_[b * d + i];
        ops::Scale(&s->tmp_[b * d], 1.0f / (1.0f + std::exp(-g)), d, &s->tmp_[b * d]);
      }
    }
    std::copy(s->tmp_.begin(), s->tmp_.begin() + n * d, out);
  } else {
    std::fill(out, out + n * d, 0.0f);
  }

  auto r = routes;
  for (size_t i = 0; i < n_experts; ++i) {
    const int32_t e = r->expert;
    auto end = r;
    int64_t rows = 0;
    for (; end != routes_end && end->expert == e; ++end, ++rows) {
      std::copy(&s->xb_[end->token * d], &s->xb_[(end->token + 1) * d], &s->moe_x_[rows * d]);
    }
    const ExpertRef& expert = layer.experts[e];
    ChunkLease chunk(store_, expert.chunk);
    RETURN_IF_ERROR(chunk.Acquire());
    const uint8_t* base = chunk.slot();
    ++moe_stats_.expert_acquires;
    moe_stats_.expert_bytes += model_->chunks()[expert.chunk].tensor_bytes;
    RETURN_IF_ERROR(kernels::MatMul(layer.gate_exps.ViewAt(base + expert.gate_offset),
                                    s->moe_x_.data(), d, rows, s->gate_.data(), ff, pool_,
                                    scratch));
    RETURN_IF_ERROR(kernels::MatMul(layer.up_exps.ViewAt(base + expert.up_offset), s->moe_x_.data(),
                                    d, rows, s->up_.data(), ff, pool_, scratch));
    ops::SwiGlu(s->gate_.data(), s->up_.data(), rows * ff, s->gate_.data());
    RETURN_IF_ERROR(kernels::MatMul(layer.down_exps.ViewAt(base + expert.down_offset),
                                    s->gate_.data(), ff, rows, s->tmp_.data(), d, pool_, scratch));
    for (int64_t row = 0; r != end; ++r, ++row) {
      float* y = out + r->token * d;
      const float* e_out = &s->tmp_[row * d];
      for (int64_t j = 0; j < d; ++j) y[j] += r->weight * e_out[j];
    }
  }
  ops::Add(s->x_.data(), out, n * d, s->x_.data());
  return absl::OkStatus();
}

absl::Status Forward::PredictNextExperts(SequenceState* s, int64_t l) {
  const HParams& hp = model_->hparams();
  const int64_t d = hp.n_embd;
  const LayerTensors& next = model_->layers()[l + 1];
  ChunkLease trunk(store_, next.ffn_chunk);
  RETURN_IF_ERROR(trunk.Acquire());
  const uint8_t* slot = trunk.slot();
  // x_ is layer l's residual after its attention; router_ and select_ are
  // free again once l's routes are recorded.
  ops::RmsNorm(s->x_.data(), next.ffn_norm.F32(slot), d, hp.rms_eps, s->lookahead_x_.data());
  RETURN_IF_ERROR(kernels::MatMul(next.router.View(slot), s->lookahead_x_.data(), d, 1,
                                  s->router_.data(), hp.moe.n_expert, pool_, &s->matvec_scratch_));
  const float* bias = next.expert_bias.present ? next.expert_bias.F32(slot) : nullptr;
  RouteToken(hp.moe, s->router_.data(), bias, s->select_.data(), s->lookahead_ids_.data(),
             s->lookahead_weights_.data());
  s->lookahead_layer_ = l + 1;
  return absl::OkStatus();
}

}  // namespace waste::model
