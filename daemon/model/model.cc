#include "daemon/model/model.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/kernels/cpu_features.h"
#include "daemon/model/binding.h"

namespace waste::model {

using internal::ChunkBuilder;

namespace {

// The llama/qwen attention block: Q/K/V/O, qwen2's and glm4moe's biases,
// qwen3's Q/K norms (optional in glm4moe: GLM-4.5 has them, -Air not),
// gpt-oss's biases (the output's too) and sinks, gemma2/3's post-attention
// norm and gemma3's Q/K norms.
absl::Status BindAttention(ChunkBuilder* b, const HParams& hp, const std::string& p,
                           LayerTensors* layer) {
  const bool gpt_oss = hp.arch == Arch::kGptOss;
  const bool qkv_bias =
      hp.arch == Arch::kQwen2 || hp.arch == Arch::kQwen2Moe || gpt_oss || hp.arch == Arch::kGlm4Moe;
  const bool qk_norm =
      hp.arch == Arch::kQwen3 || hp.arch == Arch::kQwen3Moe || hp.arch == Arch::kGemma3;
  RETURN_IF_ERROR(b->Bind(p + "attn_q.weight", hp.n_embd, hp.q_dim(), true, &layer->wq));
  RETURN_IF_ERROR(b->Bind(p + "attn_k.weight", hp.n_embd, hp.kv_dim(), true, &layer->wk));
  RETURN_IF_ERROR(b->Bind(p + "attn_v.weight", hp.n_embd, hp.kv_dim(), true, &layer->wv));
  RETURN_IF_ERROR(b->Bind(p + "attn_output.weight", hp.q_dim(), hp.n_embd, true, &layer->wo));
  RETURN_IF_ERROR(b->Bind(p + "attn_q.bias", hp.q_dim(), 0, qkv_bias, &layer->bq));
  RETURN_IF_ERROR(b->Bind(p + "attn_k.bias", hp.kv_dim(), 0, qkv_bias, &layer->bk));
  RETURN_IF_ERROR(b->Bind(p + "attn_v.bias", hp.kv_dim(), 0, qkv_bias, &layer->bv));
  RETURN_IF_ERROR(b->Bind(p + "attn_output.bias", hp.n_embd, 0, gpt_oss, &layer->bo));
  RETURN_IF_ERROR(b->Bind(p + "attn_sinks.weight", hp.n_head, 0, gpt_oss, &layer->sinks));
  RETURN_IF_ERROR(b->Bind(p + "attn_q_norm.weight", hp.head_dim, 0, qk_norm, &layer->q_norm));
  RETURN_IF_ERROR(b->Bind(p + "attn_k_norm.weight", hp.head_dim, 0, qk_norm, &layer->k_norm));
  if (hp.post_norms) {  // (gpt-oss's post_attention_norm is its FFN's norm.)
    RETURN_IF_ERROR(
        b->Bind(p + "post_attention_norm.weight", hp.n_embd, 0, true, &layer->attn_post_norm));
  }
  if (layer->q_norm.present != layer->k_norm.present) {
    return absl::InvalidArgumentError(absl::StrCat(
        p, "attn_q_norm.weight and attn_k_norm.weight come together; the file has only ",
        layer->q_norm.present ? "the first" : "the second"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> Model::Create(const storage::GgufFile& gguf) {
  auto model = std::unique_ptr<Model>(new Model());
  ASSIGN_OR_RETURN(model->hparams_, ReadHParams(gguf));
  const HParams& hp = model->hparams_;
  ChunkBuilder builder(gguf, &model->chunks_, &model->weight_bytes_, &model->max_cols_);

  GlobalTensors& g = model->globals_;
  // With an output head of its own, the embedding table is only ever read a
  // row per token: it gets a chunk of its own that need not be in memory.
  const bool tied = gguf.FindTensor("output.weight") == nullptr;
  if (tied) {
    RETURN_IF_ERROR(builder.Bind("token_embd.weight", hp.n_embd, hp.n_vocab, true, &g.token_embd));
  }
  RETURN_IF_ERROR(builder.Bind("output_norm.weight", hp.n_embd, 0, true, &g.output_norm));
  RETURN_IF_ERROR(builder.Bind("output.weight", hp.n_embd, hp.n_vocab, false, &g.output));
  RETURN_IF_ERROR(builder.Bind("rope_freqs.weight", hp.rope.n_rot / 2, 0, false, &g.rope_freqs));
  g.chunk = builder.Finish("global", -1, memory::ChunkKind::kGlobal);
  g.embd_chunk = g.chunk;
  if (tied) {
    g.output = g.token_embd;
  } else {
    RETURN_IF_ERROR(builder.Bind("token_embd.weight", hp.n_embd, hp.n_vocab, true, &g.token_embd));
    g.embd_chunk = builder.Finish("embeddings", -1, memory::ChunkKind::kEmbeddings);
    model->chunks_[g.embd_chunk].row_bytes = g.token_embd.row_bytes;
  }

  for (int64_t l = 0; l < hp.n_layer; ++l) {
    LayerTensors layer;
    std::string p = absl::StrCat("blk.", l, ".");
    RETURN_IF_ERROR(builder.Bind(p + "attn_norm.weight", hp.n_embd, 0, true, &layer.attn_norm));
    RETURN_IF_ERROR(hp.is_mla() ? internal::BindMlaAttention(&builder, hp, l, &layer)
                                : BindAttention(&builder, hp, p, &layer));
    layer.attn_chunk =
        builder.Finish(p + "attn", static_cast<int>(l), memory::ChunkKind::kAttention);
    if (hp.IsMoeLayer(l)) {
      RETURN_IF_ERROR(internal::BindMoeBlock(&builder, hp, l, &layer));
      model->layers_.push_back(std::move(layer));
      continue;
    }
    RETURN_IF_ERROR(
        builder.Bind(internal::FfnNormName(hp, l), hp.n_embd, 0, true, &layer.ffn_norm));
    RETURN_IF_ERROR(builder.Bind(p + "ffn_gate.weight", hp.n_embd, hp.n_ff, true, &layer.gate));
    RETURN_IF_ERROR(builder.Bind(p + "ffn_up.weight", hp.n_embd, hp.n_ff, true, &layer.up));
    RETURN_IF_ERROR(builder.Bind(p + "ffn_down.weight", hp.n_ff, hp.n_embd, true, &layer.down));
    if (hp.post_norms) {
      RETURN_IF_ERROR(
          builder.Bind(p + "post_ffw_norm.weight", hp.n_embd, 0, true, &layer.ffn_post_norm));
    }
    layer.ffn_chunk = builder.Finish(p + "ffn", static_cast<int>(l), memory::ChunkKind::kFfn);
    model->layers_.push_back(std::move(layer));
  }
  MarkInterleaving(model.get());
  return model;
}

void Model::MarkInterleaving(Model* model) {
  auto mark = [](TensorRef* t) {
    const kernels::WeightLayout layout =
        kernels::ResidentLayoutFor(t->type, t->cols, kernels::DetectIsa());
    t->interleaves = t->present && t->n_mat == 1 && layout != kernels::WeightLayout::kRows;
    if (t->interleaves) t->interleaved_layout = layout;
  };
  // Not token_embd (read by row), nor output when it is token_embd (tied);
  // not wk_b/wv_b (per-head views of 3-D tensors), wkv_b (per-head rows
  // read, key rows transposed: fused_keys.h) nor the expert slices.
  GlobalTensors& g = model->globals_;
  if (g.output.place.chunk != g.token_embd.place.chunk ||
      g.output.place.slot_offset != g.token_embd.place.slot_offset) {
    mark(&g.output);
  }
  for (LayerTensors& l : model->layers_) {
    for (TensorRef* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down, &l.wq_a, &l.wq_b,
                         &l.wkv_a_mqa, &l.router, &l.gate_shexp, &l.up_shexp, &l.down_shexp}) {
      mark(t);
    }
  }
}

void ForEachTensor(const Model& model, absl::FunctionRef<void(const TensorRef&)> fn) {
  const GlobalTensors& g = model.globals();
  for (const TensorRef* t : {&g.token_embd, &g.output_norm, &g.output, &g.rope_freqs}) {
    if (t->present) fn(*t);
  }
  for (const LayerTensors& l : model.layers()) {
    for (const TensorRef* t : {&l.attn_norm,    &l.wq,        &l.wk,          &l.wv,
                               &l.wo,           &l.bq,        &l.bk,          &l.bv,
                               &l.q_norm,       &l.k_norm,    &l.ffn_norm,    &l.gate,
                               &l.up,           &l.down,      &l.wq_a,        &l.q_a_norm,
                               &l.wq_b,         &l.wkv_a_mqa, &l.kv_a_norm,   &l.wk_b,
                               &l.wv_b,         &l.wkv_b,     &l.router,      &l.expert_bias,
                               &l.gate_shexp,   &l.up_shexp,  &l.down_shexp,  &l.gate_inp_shexp,
                               &l.bo,           &l.sinks,     &l.router_bias, &l.attn_post_norm,
                               &l.ffn_post_norm}) {
      if (t->present) fn(*t);
    }
  }
}

void InterleaveChunk(const Model& model, memory::ChunkId id, uint8_t* slot) {
  ForEachTensor(model, [&](const TensorRef& t) {
    if (t.interleaves && t.place.chunk == id) {
      kernels::InterleaveRows(t.type, t.rows, t.cols, slot + t.place.slot_offset,
                              t.interleaved_layout);
    }
  });
}

}  // namespace waste::model
