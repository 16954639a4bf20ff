// Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2) in the absorbed form
// llama.cpp's deepseek2 graph uses:
//   c    = rms_norm(x W_kv_a[:kv_lora])              the latent, per token
//   k_pe = rope(x W_kv_a[kv_lora:])                  one rope key for all heads
//   q_h  = [q_nope_h | q_pe_h] from attn_q (or q_a -> norm -> q_b), q_pe roped
//   score_h(t) = (q_nope_h . (W_k_b,h^T c_t) + q_pe_h . k_pe_t) * kq_scale
//              = [W_k_b,h q_nope_h | q_pe_h] . [c_t | k_pe_t] * kq_scale
//   out_h = W_v_b,h (sum_t p_h(t) c_t)
// so the cache holds only [c_t | k_pe_t] (kv_lora_rank + rope dims per
// position) and attention is MQA over it with head_dim kv_lora_rank + rope.
// That row is both K and V: the kernel's output per head is
// [sum p c | sum p k_pe], of which the first kv_lora_rank dims are used.
// Files with the fused attn_kv_b (MlaParams::fused_kv_b) hold W_k_b,h
// transposed, as rows of kv_lora_rank: the absorption reads a copy derived
// once per layer (fused_keys.h); W_v_b,h is rows of it as they are.
#include "common/logging.h"
#include "common/status_macros.h"
#include "daemon/kernels/ops/ops.h"
#include "daemon/kernels/ops/rope.h"
#include "daemon/model/chunk_lease.h"
#include "daemon/model/forward.h"
#include "daemon/model/fused_keys.h"
#include "daemon/model/step_workspace.h"

namespace waste::model {

namespace ops = kernels::ops;
using internal::ChunkLease;

absl::Status Forward::MlaAttention(std::span<const SequenceStep> steps, const LayerTensors& layer,
                                   int64_t l, int64_t n) {
  const HParams& hp = model_->hparams();
  internal::StepWorkspace& ws = *ws_;
  const MlaParams& mla = hp.mla;
  ChunkLease chunk(store_, layer.attn_chunk, device_);
  RETURN_IF_ERROR(chunk.Acquire());
  PrefetchAfter(l, /*ffn=*/false);
  const uint8_t* slot = chunk.slot();
  const int64_t d = hp.n_embd, n_head = hp.n_head;
  const int64_t q_head = mla.qk_nope + mla.qk_rope;  // Per-head query as projected.
  const int64_t row = hp.head_dim;                   // kv_lora_rank + rope: cached row.
  const int64_t q_stride = n_head * q_head, abs_stride = n_head * row;
  const int64_t v_stride = n_head * mla.v_head;

  for (int64_t b = 0; b < n; ++b) {
    ops::RmsNorm(&ws.x[b * d], layer.attn_norm.F32(slot), d, hp.rms_eps, &ws.xb[b * d]);
  }
  // The query's first projection (q_a, or attn_q itself) and kv_a read the
  // same normed input: one loop.
  const int64_t r = mla.q_lora_rank;
  const kernels::SharedProduct from_x[] = {
      layer.wq_a.present ? kernels::SharedProduct{chunk.View(layer.wq_a), ws.q_lora.data(), r}
                         : kernels::SharedProduct{chunk.View(layer.wq), ws.mla_q.data(), q_stride},
      {chunk.View(layer.wkv_a_mqa), ws.k.data(), row}};
  internal::ProductBatch batch(device_, chunk);
  RETURN_IF_ERROR(SharedProducts(chunk, from_x, ws.xb.data(), d, n, ws.row_paths.data()));
  RETURN_IF_ERROR(batch.End());
  if (layer.wq_a.present) {
    for (int64_t b = 0; b < n; ++b) {
      ops::RmsNorm(&ws.q_lora[b * r], layer.q_a_norm.F32(slot), r, hp.rms_eps, &ws.q_lora[b * r]);
    }
    RETURN_IF_ERROR(Product(chunk, chunk.View(layer.wq_b), ws.q_lora.data(), r, n, ws.mla_q.data(),
                            q_stride, ws.row_paths.data()));
  }

  // The cached row [norm(c) | rope(k_pe)], and each head's rope part of the
  // query moved into place behind its absorbed part.
  const int64_t table_floats = ops::RopeTableFloats(hp.rope);
  const int rope_dim = static_cast<int>(mla.qk_rope);
  for (int64_t b = 0; b < n; ++b) {
    float* kv = &ws.k[b * row];
    ops::RmsNorm(kv, layer.kv_a_norm.F32(slot), mla.kv_lora_rank, hp.rms_eps, kv);
    const float* table = &ws.rope_table[b * table_floats];
    ops::RopeApply(hp.rope, table, 1, rope_dim, kv + mla.kv_lora_rank, kv + mla.kv_lora_rank);
    for (int64_t h = 0; h < n_head; ++h) {
      ops::RopeApply(hp.rope, table, 1, rope_dim,
                     &ws.mla_q[b * q_stride + h * q_head + mla.qk_nope],
                     &ws.q[b * abs_stride + h * row + mla.kv_lora_rank]);
    }
  }
  // Absorb W_k_b into the query: q_h[:kv_lora] = W_k_b,h q_nope_h.
  const int64_t kv_b_head = mla.qk_nope + mla.v_head;  // Rows per head of a fused attn_kv_b.
  if (mla.fused_kv_b) {
    // What llama.cpp's imatrix sees of attn_kv_b: the latent, every row.
    if (observer_ != nullptr) {
      observer_->OnProduct(chunk.id(), layer.wkv_b.place.slot_offset, chunk.View(layer.wkv_b),
                           ws.k.data(), row, n);
    }
    uint8_t* keys = reinterpret_cast<uint8_t*>(ws.fused_keys.data()) +
                    l * internal::FusedKeyLayerBytes(*model_);
    if (!ws.fused_keys_ready[l]) {
      internal::DeriveFusedKeys(*model_, layer, slot, pool_, keys);
      ws.fused_keys_ready[l] = 1;
    }
    RETURN_IF_ERROR(HeadProducts(
        chunk, [&](int64_t h) { return internal::FusedKeyView(*model_, layer, keys, h); },
        /*observed=*/false, ws.mla_q.data(), q_head, q_stride, n, ws.q.data(), row, abs_stride));
  } else {
    RETURN_IF_ERROR(HeadProducts(
        chunk, [&](int64_t h) { return layer.wk_b.MatrixView(slot, h); }, /*observed=*/true,
        ws.mla_q.data(), q_head, q_stride, n, ws.q.data(), row, abs_stride));
  }

  // Each sequence's rows against its own cache.
  ops::AttentionParams params;
  params.n_head = static_cast<int>(n_head);
  params.n_kv_head = 1;
  params.head_dim = static_cast<int>(row);
  params.scale = mla.kq_scale;
  for (size_t i = 0; i < steps.size(); ++i) {
    SequenceState* s = steps[i].state;
    const int64_t first = ws.first_row[i], rows = ws.first_row[i + 1] - first;
    ops::KvCacheLayer cache = s->kv_.Layer(l);
    ops::KvStore(cache, s->n_past_, rows, &ws.k[first * row], &ws.k[first * row]);
    ops::Attention(params, cache, &ws.q[first * abs_stride], rows, s->n_past_,
                   &ws.att[first * abs_stride], ws.attn_scratch.data(),
                   static_cast<int64_t>(ws.attn_scratch.size()),
                   [this](int64_t count, absl::FunctionRef<void(int64_t, int64_t)> body) {
                     pool_->ParallelFor(count, body);
                   });
  }
  // Decompress each head's latent mix: v_h = W_v_b,h (sum p c).
  RETURN_IF_ERROR(HeadProducts(
      chunk,
      [&](int64_t h) {
        return mla.fused_kv_b ? layer.wkv_b.RowsView(slot, h * kv_b_head + mla.qk_nope, mla.v_head)
                              : layer.wv_b.MatrixView(slot, h);
      },
      /*observed=*/!mla.fused_kv_b, ws.att.data(), row, abs_stride, n, ws.xb.data(), mla.v_head,
      v_stride));
  RETURN_IF_ERROR(Product(chunk, chunk.View(layer.wo), ws.xb.data(), v_stride, n, ws.tmp.data(), d,
                          ws.row_paths.data()));
  ops::Add(ws.x.data(), ws.tmp.data(), n * d, ws.x.data());
  return absl::OkStatus();
}

absl::Status Forward::HeadProducts(const ChunkLease& chunk, HeadView view, bool observed,
                                   const float* x, int64_t x_head, int64_t x_stride, int64_t n,
                                   float* y, int64_t y_head, int64_t y_stride) {
  const int64_t n_head = model_->hparams().n_head;
  WCHECK(observed || !chunk.on_device()) << "a device chunk's products are always observed";
  if ((observed && observer_ != nullptr) || chunk.on_device()) {
    // The heads are independent: on a device, one batch.
    internal::ProductBatch batch(device_, chunk);
    for (int64_t h = 0; h < n_head; ++h) {
      RETURN_IF_ERROR(
          Product(chunk, view(h), x + h * x_head, x_stride, n, y + h * y_head, y_stride));
    }
    return batch.End();
  }
  kernels::OwnProduct* products = ws_->head_products.data();
  for (int64_t b = 0; b < n; b += kMaxProductRows) {
    for (int64_t h = 0; h < n_head; ++h) {
      products[h] = {view(h), x + b * x_stride + h * x_head, y + b * y_stride + h * y_head};
    }
    RETURN_IF_ERROR(kernels::MatMulEach({products, static_cast<size_t>(n_head)}, x_stride, y_stride,
                                        std::min(kMaxProductRows, n - b), pool_, &ws_->matvec));
  }
  return absl::OkStatus();
}

}  // namespace waste::model
