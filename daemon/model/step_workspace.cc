#include "daemon/model/step_workspace.h"

#include <algorithm>

#include "common/logging.h"
#include "daemon/kernels/ops/rope.h"
#include "daemon/model/fused_keys.h"

namespace waste::model::internal {
namespace {

namespace ops = kernels::ops;

size_t MatVecScratchFor(const Model& model, int64_t rows) {
  size_t bytes = 0;
  auto consider = [&](const TensorRef& t) {
    if (t.present) bytes = std::max(bytes, kernels::MatVecScratchBytes(t.type, t.cols, rows));
  };
  consider(model.globals().output);
  for (const LayerTensors& l : model.layers()) {
    for (const TensorRef* t :
         {&l.wq,         &l.wk,     &l.wv,        &l.wo,         &l.gate,
          &l.up,         &l.down,   &l.wq_a,      &l.wq_b,       &l.wkv_a_mqa,
          &l.wk_b,       &l.wv_b,   &l.wkv_b,     &l.gate_shexp, &l.up_shexp,
          &l.down_shexp, &l.router, &l.gate_exps, &l.up_exps,    &l.down_exps}) {
      consider(*t);
    }
    if (l.wkv_b.present) {  // Its derived W_k_b (fused_keys.h).
      const int64_t nope = model.hparams().mla.qk_nope;
      bytes = std::max(bytes,
                       kernels::MatVecScratchBytes(FusedKeyType(l.wkv_b.type, nope), nope, rows));
    }
  }
  return bytes;
}

// Element counts of the workspace's buffers, for the constructor and
// WorkspaceBytes alike.
struct BufferSizes {
  int64_t x, xb, q, kv, att, tmp, ff, rope_table, attn_scratch;
  int64_t q_lora, mla_q, heads;
  int64_t router, select, moe_x, moe_out, routes, experts, prefetch, lookahead_x, lookahead;
  int64_t expert_out, groups, together;
  int64_t first_row, head_sequences, logits;
  int64_t embd_row;  // Bytes: one embedding row read from the store.
  size_t matvec;
  uint64_t fused_keys;  // Bytes, every layer's.
  int64_t fused_ready;  // Their per-layer flags.

  BufferSizes(const Model& model, const ForwardOptions& options) {
    const HParams& hp = model.hparams();
    const int64_t t = options.max_step_tokens;
    const MlaParams& mla = hp.mla;
    x = tmp = t * hp.n_embd;
    xb = t * std::max({hp.n_embd, hp.q_dim(), hp.n_head * mla.v_head});
    q = att = t * hp.q_dim();
    kv = t * hp.kv_dim();
    ff = t * hp.max_ff();
    // Gemma 3: the sliding-window layers' tables after the others'.
    rope_table = (hp.has_rope_swa ? 2 : 1) * t * ops::RopeTableFloats(hp.rope);
    attn_scratch = ops::AttentionScratchFloats(AttentionParamsOf(hp));
    q_lora = t * mla.q_lora_rank;
    mla_q = t * hp.n_head * (mla.qk_nope + mla.qk_rope);
    heads = hp.is_mla() ? hp.n_head : 0;
    const bool moe = hp.moe.n_expert > 0;
    router = moe ? t * hp.moe.n_expert : 0;
    select = hp.moe.n_expert;
    moe_x = moe_out = moe ? t * hp.n_embd : 0;
    routes = t * hp.moe.n_expert_used;
    // This layer's experts, the next layer's predicted ones (each at most
    // all of a layer's), then the next layer's two blocks.
    experts = moe ? 2 * hp.moe.n_expert + 2 : 0;
    // Those, or PrefetchAfter's three blocks.
    prefetch = std::max<int64_t>(experts, 3);
    lookahead_x = moe ? t * hp.n_embd : 0;
    lookahead = routes;
    expert_out = std::min(t, kAnyOrderMaxRows) * hp.moe.n_expert_used * hp.n_embd;
    groups = moe ? routes + 1 : 0;
    together = moe ? static_cast<int64_t>(kMaxExpertsTogether) : 0;
    first_row = t + 1;
    head_sequences = t;
    logits = options.max_logit_rows * hp.n_vocab;
    const GlobalTensors& g = model.globals();
    embd_row = g.embd_separate() ? static_cast<int64_t>(g.token_embd.row_bytes) : 0;
    matvec = MatVecScratchFor(model, std::min(t, kMaxProductRows));
    fused_keys = storage::AlignUp(hp.n_layer * FusedKeyLayerBytes(model), 64);
    fused_ready = fused_keys > 0 ? hp.n_layer : 0;
  }
  uint64_t Bytes() const {
    return sizeof(float) *
               (x + xb + q + 2 * kv + att + tmp + 2 * ff + rope_table + attn_scratch + q_lora +
                mla_q + router + select + moe_x + moe_out + lookahead_x + expert_out + logits) +
           groups * (sizeof(int32_t) + sizeof(uint8_t)) +
           routes * (sizeof(ExpertRoute) + sizeof(int32_t) + sizeof(float)) +
           lookahead * (2 * sizeof(int32_t) + sizeof(float)) +
           (experts + prefetch) * sizeof(memory::ChunkId) + first_row * sizeof(int64_t) +
           (first_row - 1 + head_sequences) * sizeof(kernels::ProductPath) +
           head_sequences * sizeof(int32_t) + embd_row + matvec + fused_keys + fused_ready +
           (heads + 2 * together) * sizeof(kernels::OwnProduct) + together * sizeof(int32_t);
  }
};

template <typename T>
uint64_t BytesOf(const std::vector<T>& v) {
  return v.size() * sizeof(T);
}

}  // namespace

ops::AttentionParams AttentionParamsOf(const HParams& hp) {
  ops::AttentionParams params;
  params.n_head = static_cast<int>(hp.n_head);
  params.n_kv_head = static_cast<int>(hp.n_head_kv);
  params.head_dim = static_cast<int>(hp.head_dim);
  // 0 (the default 1/sqrt) unless MLA or gemma.
  params.scale = hp.is_mla() ? hp.mla.kq_scale : hp.attn_scale;
  params.softcap = hp.attn_softcap;
  return params;
}

ForwardOptions NormalizedOptions(const ForwardOptions& options) {
  WCHECK(options.max_step_tokens >= 1 && options.max_step_tokens <= kMaxStepTokens)
      << "max_step_tokens " << options.max_step_tokens << " outside [1, " << kMaxStepTokens << "]";
  WCHECK(options.max_logit_rows >= 1) << "max_logit_rows " << options.max_logit_rows;
  ForwardOptions out = options;
  out.max_logit_rows = std::min(options.max_logit_rows, options.max_step_tokens);
  return out;
}

StepWorkspace::StepWorkspace(const Model& model, const ForwardOptions& options) {
  const BufferSizes size(model, options);
  x.resize(size.x);
  xb.resize(size.xb);
  q.resize(size.q);
  k.resize(size.kv);
  v.resize(size.kv);
  att.resize(size.att);
  tmp.resize(size.tmp);
  gate.resize(size.ff);
  up.resize(size.ff);
  rope_table.resize(size.rope_table);
  attn_scratch.resize(size.attn_scratch);
  q_lora.resize(size.q_lora);
  mla_q.resize(size.mla_q);
  head_products.resize(size.heads);
  router.resize(size.router);
  select.resize(size.select);
  moe_x.resize(size.moe_x);
  moe_out.resize(size.moe_out);
  routes.resize(size.routes);
  route_ids.resize(size.routes);
  route_weights.resize(size.routes);
  expert_chunks.resize(size.experts);
  prefetch_ids.resize(size.prefetch);
  lookahead_x.resize(size.lookahead_x);
  lookahead_ids.resize(size.lookahead);
  lookahead_union.resize(size.lookahead);
  lookahead_weights.resize(size.lookahead);
  expert_out.resize(size.expert_out);
  group_start.resize(size.groups);
  group_done.resize(size.groups);
  experts_together.resize(size.together);
  expert_products.resize(2 * size.together);
  first_row.resize(size.first_row);
  row_paths.resize(size.first_row - 1);
  head_paths.resize(size.head_sequences);
  head_sequences.resize(size.head_sequences);
  logits.resize(size.logits);
  embd_row.resize(size.embd_row);
  matvec = kernels::Scratch(size.matvec);
  if (size.fused_keys > 0) {
    fused_keys = storage::AlignedBuffer(size.fused_keys, 64);
    WCHECK(fused_keys.data() != nullptr) << "cannot allocate the derived MLA key matrices";
  }
  fused_keys_ready.assign(size.fused_ready, 0);
}

uint64_t StepWorkspace::Bytes(const Model& model, const ForwardOptions& options) {
  return BufferSizes(model, options).Bytes();
}

uint64_t StepWorkspace::bytes() const {
  uint64_t sum = 0;
  for (const std::vector<float>* f : {&x,
                                      &xb,
                                      &q,
                                      &k,
                                      &v,
                                      &att,
                                      &tmp,
                                      &gate,
                                      &up,
                                      &rope_table,
                                      &attn_scratch,
                                      &q_lora,
                                      &mla_q,
                                      &router,
                                      &select,
                                      &moe_x,
                                      &moe_out,
                                      &route_weights,
                                      &lookahead_x,
                                      &lookahead_weights,
                                      &expert_out,
                                      &logits}) {
    sum += BytesOf(*f);
  }
  return sum + BytesOf(routes) + BytesOf(route_ids) + BytesOf(expert_chunks) +
         BytesOf(prefetch_ids) + BytesOf(lookahead_ids) + BytesOf(lookahead_union) +
         BytesOf(first_row) + BytesOf(row_paths) + BytesOf(head_paths) + BytesOf(head_sequences) +
         BytesOf(group_start) + BytesOf(group_done) + BytesOf(embd_row) + BytesOf(head_products) +
         BytesOf(experts_together) + BytesOf(expert_products) + matvec.bytes() + fused_keys.size() +
         BytesOf(fused_keys_ready);
}

}  // namespace waste::model::internal
