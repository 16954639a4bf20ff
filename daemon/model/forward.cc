#include "daemon/model/forward.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "daemon/kernels/dequantize.h"
#include "daemon/kernels/ops/ops.h"
#include "daemon/kernels/ops/rope.h"
#include "daemon/model/chunk_lease.h"
#include "storage/logging.h"
#include "storage/status_macros.h"

namespace waste::model {
namespace {

namespace ops = kernels::ops;

using internal::ChunkLease;

}  // namespace

KvCache::KvCache(const HParams& hp, int64_t n_ctx, ops::KvType type)
    : n_ctx_(n_ctx),
      type_(type),
      n_kv_head_(static_cast<int>(hp.n_head_kv)),
      head_dim_(static_cast<int>(hp.head_dim)),
      shared_kv_(hp.is_mla()),
      layer_bytes_(storage::AlignUp(ops::KvCacheBytes(type, n_ctx, n_kv_head_, head_dim_), 64)),
      buffer_(std::max<uint64_t>(1, Bytes(hp, n_ctx, type)), 64) {
  WCHECK(buffer_.data() != nullptr) << "cannot allocate the KV cache";
}

uint64_t KvCache::Bytes(const HParams& hp, int64_t n_ctx, ops::KvType type) {
  uint64_t layer = storage::AlignUp(
      ops::KvCacheBytes(type, n_ctx, static_cast<int>(hp.n_head_kv), static_cast<int>(hp.head_dim)),
      64);
  return (hp.is_mla() ? 1 : 2) * layer * hp.n_layer;
}

ops::KvCacheLayer KvCache::Layer(int64_t l) const {
  ops::KvCacheLayer layer;
  layer.type = type_;
  if (shared_kv_) {
    layer.k = layer.v = buffer_.data() + l * layer_bytes_;
  } else {
    layer.k = buffer_.data() + 2 * l * layer_bytes_;
    layer.v = buffer_.data() + (2 * l + 1) * layer_bytes_;
  }
  layer.n_ctx = n_ctx_;
  layer.n_kv_head = n_kv_head_;
  layer.head_dim = head_dim_;
  return layer;
}

namespace {

ops::AttentionParams AttentionParamsOf(const HParams& hp) {
  ops::AttentionParams params;
  params.n_head = static_cast<int>(hp.n_head);
  params.n_kv_head = static_cast<int>(hp.n_head_kv);
  params.head_dim = static_cast<int>(hp.head_dim);
  params.scale = hp.mla.kq_scale;  // 0 (the default 1/sqrt) unless MLA.
  return params;
}

size_t MatVecScratchFor(const Model& model) {
  size_t bytes = 0;
  auto consider = [&](const TensorRef& t) {
    if (t.present) {
      bytes = std::max(bytes, kernels::MatVecScratchBytes(t.type, t.cols, kMaxForwardBatch));
    }
  };
  consider(model.globals().output);
  for (const LayerTensors& l : model.layers()) {
    for (const TensorRef* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down, &l.wq_a,
                               &l.wq_b, &l.wkv_a_mqa, &l.wk_b, &l.wv_b, &l.gate_shexp, &l.up_shexp,
                               &l.down_shexp, &l.gate_exps, &l.up_exps, &l.down_exps}) {
      consider(*t);
    }
  }
  return bytes;
}

// Element counts of a sequence's activation buffers, for the constructor
// and the memory plan alike.
struct BufferSizes {
  int64_t x, xb, q, kv, att, tmp, ff, rope_table, attn_scratch;
  int64_t q_lora, mla_q;
  int64_t router, select, moe_x, moe_out, routes, experts, lookahead_x, lookahead;

  explicit BufferSizes(const HParams& hp) {
    const int64_t b = kMaxForwardBatch;
    const MlaParams& mla = hp.mla;
    x = tmp = moe_x = b * hp.n_embd;
    xb = b * std::max({hp.n_embd, hp.q_dim(), hp.n_head * mla.v_head});
    q = att = b * hp.q_dim();
    kv = b * hp.kv_dim();
    ff = b * hp.max_ff();
    rope_table = b * ops::RopeTableFloats(hp.rope);
    attn_scratch = ops::AttentionScratchFloats(AttentionParamsOf(hp));
    q_lora = b * mla.q_lora_rank;
    mla_q = b * hp.n_head * (mla.qk_nope + mla.qk_rope);
    const bool moe = hp.moe.n_expert > 0;
    router = moe ? b * hp.moe.n_expert : 0;
    select = hp.moe.n_expert;
    moe_out = moe ? b * hp.n_embd : 0;
    moe_x = moe ? moe_x : 0;
    routes = b * hp.moe.n_expert_used;
    // This layer's experts, the next layer's predicted ones (router
    // lookahead), then the next layer's chunks.
    experts = hp.moe.n_expert + hp.moe.n_expert_used + 4;
    lookahead_x = moe ? hp.n_embd : 0;
    lookahead = hp.moe.n_expert_used;
  }
  uint64_t Bytes() const {
    return sizeof(float) *
               (x + xb + 2 * q + 2 * kv + att + tmp + 2 * ff + rope_table + attn_scratch + q_lora +
                mla_q + router + select + moe_x + moe_out + lookahead_x) +
           (routes + lookahead) * (sizeof(ExpertRoute) + sizeof(int32_t) + sizeof(float)) +
           experts * sizeof(cache::ChunkId);
  }
};

}  // namespace

SequenceState::SequenceState(const Model& model, int64_t n_ctx, ops::KvType kv_type)
    : kv_(model.hparams(), n_ctx, kv_type), matvec_scratch_(MatVecScratchFor(model)) {
  const BufferSizes size(model.hparams());
  x_.resize(size.x);
  xb_.resize(size.xb);
  q_.resize(size.q);
  k_.resize(size.kv);
  v_.resize(size.kv);
  att_.resize(size.att);
  tmp_.resize(size.tmp);
  gate_.resize(size.ff);
  up_.resize(size.ff);
  rope_table_.resize(size.rope_table);
  attn_scratch_.resize(size.attn_scratch);
  q_lora_.resize(size.q_lora);
  mla_q_.resize(size.mla_q);
  router_.resize(size.router);
  select_.resize(size.select);
  moe_x_.resize(size.moe_x);
  moe_out_.resize(size.moe_out);
  routes_.resize(size.routes);
  route_ids_.resize(size.routes);
  route_weights_.resize(size.routes);
  expert_chunks_.resize(size.experts);
  lookahead_x_.resize(size.lookahead_x);
  lookahead_ids_.resize(size.lookahead);
  lookahead_weights_.resize(size.lookahead);
}

uint64_t SequenceState::bytes() const { return kv_.bytes() + matvec_scratch_.bytes(); }

uint64_t SequenceState::ScratchBytes(const Model& model) {
  return BufferSizes(model.hparams()).Bytes() + MatVecScratchFor(model);
}

absl::Status Forward::Validate(const SequenceState& s, std::span<const int32_t> tokens) const {
  const HParams& hp = model_->hparams();
  if (tokens.empty()) return absl::InvalidArgumentError("no tokens to run");
  if (s.n_past_ + static_cast<int64_t>(tokens.size()) > s.n_ctx()) {
    return absl::OutOfRangeError(absl::StrCat("context is full: ", s.n_past_, " + ", tokens.size(),
                                              " tokens exceed the context of ", s.n_ctx()));
  }
  for (int32_t token : tokens) {
    if (token < 0 || token >= hp.n_vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", token, " is outside the vocabulary of ", hp.n_vocab));
    }
  }
  return absl::OkStatus();
}

absl::Status Forward::Run(SequenceState* state, std::span<const int32_t> tokens, float* logits,
                          bool all_logits) {
  const int64_t n_vocab = model_->hparams().n_vocab;
  RETURN_IF_ERROR(Validate(*state, tokens));
  const int64_t start_pos = state->n_past_;
  for (size_t i = 0; i < tokens.size(); i += kMaxForwardBatch) {
    const size_t n = std::min<size_t>(kMaxForwardBatch, tokens.size() - i);
    const bool last = i + n == tokens.size();
    SequenceStep step{state, tokens.subspan(i, n),
                      all_logits ? logits + i * n_vocab : (last ? logits : nullptr), all_logits};
    absl::Status status = Step({&step, 1});
    if (!status.ok()) {
      state->n_past_ = start_pos;
      return status;
    }
  }
  return absl::OkStatus();
}

absl::Status Forward::Step(std::span<const SequenceStep> steps) {
  const HParams& hp = model_->hparams();
  for (const SequenceStep& step : steps) {
    RETURN_IF_ERROR(Validate(*step.state, step.tokens));
    if (step.tokens.size() > static_cast<size_t>(kMaxForwardBatch)) {
      return absl::InvalidArgumentError(
          absl::StrCat("a step takes at most ", kMaxForwardBatch, " tokens per sequence"));
    }
  }
  ChunkLease global(store_, model_->globals().chunk);
  RETURN_IF_ERROR(global.Acquire());
  for (const SequenceStep& step : steps) Embed(step.state, global.slot(), step.tokens);

  // With several sequences, the step holds each chunk while all of them use
  // it (their own Acquires then hit), so a chunk is read once per step.
  const bool hold = steps.size() > 1;
  for (int64_t l = 0; l < hp.n_layer; ++l) {
    const LayerTensors& layer = model_->layers()[l];
    {
      ChunkLease attention(store_, layer.attn_chunk);
      if (hold) RETURN_IF_ERROR(attention.Acquire());
      for (const SequenceStep& step : steps) {
        const int64_t n = static_cast<int64_t>(step.tokens.size());
        RETURN_IF_ERROR(hp.is_mla() ? MlaAttention(step.state, layer, l, n)
                                    : Attention(step.state, layer, l, n));
      }
    }
    ChunkLease ffn(store_, layer.ffn_chunk);
    if (hold) RETURN_IF_ERROR(ffn.Acquire());
    for (const SequenceStep& step : steps) {
      const int64_t n = static_cast<int64_t>(step.tokens.size());
      RETURN_IF_ERROR(hp.IsMoeLayer(l) ? MoeFeedForward(step.state, layer, l, n)
                                       : FeedForward(step.state, layer, l, n));
    }
  }
  for (const SequenceStep& step : steps) {
    const int64_t n = static_cast<int64_t>(step.tokens.size());
    step.state->n_past_ += n;
    RETURN_IF_ERROR(Head(step.state, global.slot(), n, step.logits, step.all_logits));
  }
  return absl::OkStatus();
}

void Forward::PrefetchAfter(int64_t l, bool ffn) {
  const auto& layers = model_->layers();
  cache::ChunkId upcoming[4];
  size_t n = 0;
  // The rest of this layer, then the next layer: the store decides how far
  // ahead it actually reads.
  if (!ffn) upcoming[n++] = layers[l].ffn_chunk;
  for (int64_t next = l + 1; next < static_cast<int64_t>(layers.size()) && n < 3; ++next) {
    upcoming[n++] = layers[next].attn_chunk;
    if (n < 3) upcoming[n++] = layers[next].ffn_chunk;
  }
  store_->Prefetch(std::span<const cache::ChunkId>(upcoming, n));
}

void Forward::Embed(SequenceState* s, const uint8_t* global, std::span<const int32_t> tokens) {
  const HParams& hp = model_->hparams();
  const GlobalTensors& g = model_->globals();
  const int64_t n = static_cast<int64_t>(tokens.size());
  for (int64_t b = 0; b < n; ++b) {
    kernels::DequantizeRow(g.token_embd.type,
                           g.token_embd.Data(global) + tokens[b] * g.token_embd.row_bytes,
                           &s->x_[b * hp.n_embd], hp.n_embd);
  }
  ops::RopeParams rope = hp.rope;
  if (g.rope_freqs.present) rope.freq_factors = g.rope_freqs.F32(global);
  const int64_t table_floats = ops::RopeTableFloats(rope);
  for (int64_t b = 0; b < n; ++b) {
    ops::RopeTableInit(rope, s->n_past_ + b, &s->rope_table_[b * table_floats]);
  }
}

absl::Status Forward::Head(SequenceState* s, const uint8_t* global, int64_t n, float* logits,
                           bool all_logits) {
  const HParams& hp = model_->hparams();
  const GlobalTensors& g = model_->globals();
  // Logits of the last token, or of all of them.
  if (logits == nullptr) return absl::OkStatus();
  const int64_t first = all_logits ? 0 : n - 1;
  for (int64_t b = first; b < n; ++b) {
    ops::RmsNorm(&s->x_[b * hp.n_embd], g.output_norm.F32(global), hp.n_embd, hp.rms_eps,
                 &s->xb_[(b - first) * hp.n_embd]);
  }
  return kernels::MatMul(g.output.View(global), s->xb_.data(), hp.n_embd, n - first, logits,
                         hp.n_vocab, pool_, &s->matvec_scratch_);
}

absl::Status Forward::Attention(SequenceState* s, const LayerTensors& layer, int64_t l, int64_t n) {
  const HParams& hp = model_->hparams();
  ChunkLease chunk(store_, layer.attn_chunk);
  RETURN_IF_ERROR(chunk.Acquire());
  PrefetchAfter(l, /*ffn=*/false);
  const uint8_t* slot = chunk.slot();
  const int64_t qd = hp.q_dim(), kvd = hp.kv_dim(), hd = hp.head_dim;

  for (int64_t b = 0; b < n; ++b) {
    ops::RmsNorm(&s->x_[b * hp.n_embd], layer.attn_norm.F32(slot), hp.n_embd, hp.rms_eps,
                 &s->xb_[b * hp.n_embd]);
  }
  kernels::Scratch* scratch = &s->matvec_scratch_;
  RETURN_IF_ERROR(kernels::MatMul(layer.wq.View(slot), s->xb_.data(), hp.n_embd, n, s->q_.data(),
                                  qd, pool_, scratch));
  RETURN_IF_ERROR(kernels::MatMul(layer.wk.View(slot), s->xb_.data(), hp.n_embd, n, s->k_.data(),
                                  kvd, pool_, scratch));
  RETURN_IF_ERROR(kernels::MatMul(layer.wv.View(slot), s->xb_.data(), hp.n_embd, n, s->v_.data(),
                                  kvd, pool_, scratch));
  const int64_t table_floats = ops::RopeTableFloats(hp.rope);
  for (int64_t b = 0; b < n; ++b) {
    float* q = &s->q_[b * qd];
    float* k = &s->k_[b * kvd];
    if (layer.bq.present) {
      ops::Add(q, layer.bq.F32(slot), qd, q);
      ops::Add(k, layer.bk.F32(slot), kvd, k);
      ops::Add(&s->v_[b * kvd], layer.bv.F32(slot), kvd, &s->v_[b * kvd]);
    }
    if (layer.q_norm.present) {
      for (int64_t h = 0; h < hp.n_head; ++h) {
        ops::RmsNorm(q + h * hd, layer.q_norm.F32(slot), hd, hp.rms_eps, q + h * hd);
      }
      for (int64_t h = 0; h < hp.n_head_kv; ++h) {
        ops::RmsNorm(k + h * hd, layer.k_norm.F32(slot), hd, hp.rms_eps, k + h * hd);
      }
    }
    const float* table = &s->rope_table_[b * table_floats];
    ops::RopeApply(hp.rope, table, hp.n_head, static_cast<int>(hd), q, q);
    ops::RopeApply(hp.rope, table, hp.n_head_kv, static_cast<int>(hd), k, k);
  }
  ops::KvCacheLayer cache = s->kv_.Layer(l);
  ops::KvStore(cache, s->n_past_, n, s->k_.data(), s->v_.data());
  ops::Attention(AttentionParamsOf(hp), cache, s->q_.data(), n, s->n_past_, s->att_.data(),
                 s->attn_scratch_.data(), static_cast<int64_t>(s->attn_scratch_.size()),
                 [this](int64_t count, absl::FunctionRef<void(int64_t, int64_t)> body) {
                   pool_->ParallelFor(count, body);
                 });
  RETURN_IF_ERROR(kernels::MatMul(layer.wo.View(slot), s->att_.data(), qd, n, s->tmp_.data(),
                                  hp.n_embd, pool_, scratch));
  ops::Add(s->x_.data(), s->tmp_.data(), n * hp.n_embd, s->x_.data());
  return absl::OkStatus();
}

absl::Status Forward::FeedForward(SequenceState* s, const LayerTensors& layer, int64_t l,
                                  int64_t n) {
  const HParams& hp = model_->hparams();
  ChunkLease chunk(store_, layer.ffn_chunk);
  RETURN_IF_ERROR(chunk.Acquire());
  PrefetchAfter(l, /*ffn=*/true);
  const uint8_t* slot = chunk.slot();
  for (int64_t b = 0; b < n; ++b) {
    ops::RmsNorm(&s->x_[b * hp.n_embd], layer.ffn_norm.F32(slot), hp.n_embd, hp.rms_eps,
                 &s->xb_[b * hp.n_embd]);
  }
  RETURN_IF_ERROR(SwiGluFfn(s, slot, layer.gate, layer.up, layer.down, n));
  ops::Add(s->x_.data(), s->tmp_.data(), n * hp.n_embd, s->x_.data());
  return absl::OkStatus();
}

absl::Status Forward::SwiGluFfn(SequenceState* s, const uint8_t* slot, const TensorRef& gate,
                                const TensorRef& up, const TensorRef& down, int64_t n) {
  const int64_t d = model_->hparams().n_embd, ff = gate.rows;
  kernels::Scratch* scratch = &s->matvec_scratch_;
  RETURN_IF_ERROR(
      kernels::MatMul(gate.View(slot), s->xb_.data(), d, n, s->gate_.data(), ff, pool_, scratch));
  RETURN_IF_ERROR(
      kernels::MatMul(up.View(slot), s->xb_.data(), d, n, s->up_.data(), ff, pool_, scratch));
  ops::SwiGlu(s->gate_.data(), s->up_.data(), n * ff, s->gate_.data());
  return kernels::MatMul(down.View(slot), s->gate_.data(), ff, n, s->tmp_.data(), d, pool_,
                         scratch);
}

}  // namespace waste::model
