#include "daemon/model/forward.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "daemon/kernels/dequantize.h"
#include "daemon/kernels/ops/ops.h"
#include "daemon/kernels/ops/rope.h"
#include "daemon/model/chunk_lease.h"
#include "daemon/model/device_weights.h"
#include "daemon/model/step_workspace.h"

namespace waste::model {
namespace {

namespace ops = kernels::ops;

using internal::ChunkLease;
using internal::StepWorkspace;

}  // namespace

KvCache::KvCache(const HParams& hp, int64_t n_ctx, ops::KvType type, bool rings)
    : n_ctx_(n_ctx),
      type_(type),
      n_kv_head_(static_cast<int>(hp.n_head_kv)),
      head_dim_(static_cast<int>(hp.head_dim)),
      shared_kv_(hp.is_mla()),
      buffer_(std::max<uint64_t>(1, Bytes(hp, n_ctx, type, rings)), 64) {
  WCHECK(buffer_.data() != nullptr) << "cannot allocate the KV cache";
  uint64_t offset = 0;
  for (int64_t l = 0; l < hp.n_layer; ++l) {
    const int64_t rows = LayerRows(hp, n_ctx, l, rings);
    rows_.push_back(rows);
    windows_.push_back(hp.AttentionWindow(l));
    offsets_.push_back(offset);
    offset += (shared_kv_ ? 1 : 2) *
              storage::AlignUp(ops::KvCacheBytes(type, rows, n_kv_head_, head_dim_), 64);
  }
}

bool KvCache::HoldsWindowBefore(int64_t n, int64_t written) const {
  for (size_t l = 0; l < rows_.size(); ++l) {
    // A ring holds positions from written - rows on.
    if (rows_[l] < n_ctx_ && std::max<int64_t>(0, n - windows_[l] + 1) < written - rows_[l]) {
      return false;
    }
  }
  return true;
}

int64_t KvCache::LayerRows(const HParams& hp, int64_t n_ctx, int64_t l, bool rings) {
  const int64_t window = rings ? hp.AttentionWindow(l) : 0;
  return window > 0 ? std::min(n_ctx, window + kMaxStepTokens) : n_ctx;
}

uint64_t KvCache::Bytes(const HParams& hp, int64_t n_ctx, ops::KvType type, bool rings) {
  uint64_t bytes = 0;
  for (int64_t l = 0; l < hp.n_layer; ++l) {
    bytes += (hp.is_mla() ? 1 : 2) *
             storage::AlignUp(
                 ops::KvCacheBytes(type, LayerRows(hp, n_ctx, l, rings),
                                   static_cast<int>(hp.n_head_kv), static_cast<int>(hp.head_dim)),
                 64);
  }
  return bytes;
}

uint64_t KvCache::position_bytes() const {
  return static_cast<uint64_t>(ops::KvCacheBytes(type_, 1, n_kv_head_, head_dim_));
}

ops::KvCacheLayer KvCache::Layer(int64_t l) const {
  ops::KvCacheLayer layer;
  layer.type = type_;
  char* k = buffer_.data() + offsets_[l];
  layer.k = k;
  layer.v = shared_kv_ ? k
                       : k + storage::AlignUp(
                                 ops::KvCacheBytes(type_, rows_[l], n_kv_head_, head_dim_), 64);
  layer.n_ctx = n_ctx_;
  layer.n_kv_head = n_kv_head_;
  layer.head_dim = head_dim_;
  layer.ring = rows_[l] < n_ctx_ ? rows_[l] : 0;
  return layer;
}

int64_t SequenceState::Truncate(int64_t n) {
  n = std::clamp<int64_t>(n, 0, n_past_);
  if (!kv_.HoldsWindowBefore(n, std::max(written_, n_past_))) n = 0;
  if (n == 0) written_ = 0;
  n_past_ = n;
  return n;
}

SequenceState::SequenceState(const Model& model, int64_t n_ctx, ops::KvType kv_type, bool kv_rings)
    : kv_(model.hparams(), n_ctx, kv_type, kv_rings) {}

Forward::Forward(const Model* model, cache::ChunkStore* store, kernels::ThreadPool* pool,
                 const ForwardOptions& options)
    : model_(model),
      store_(store),
      pool_(pool),
      options_(internal::NormalizedOptions(options)),
      ws_(std::make_unique<StepWorkspace>(*model, options_)) {}

Forward::~Forward() = default;

uint64_t Forward::WorkspaceBytes(const Model& model, const ForwardOptions& options) {
  return StepWorkspace::Bytes(model, internal::NormalizedOptions(options));
}

uint64_t Forward::workspace_bytes() const { return ws_->bytes(); }

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
                          bool all_logits, bool prompt) {
  const int64_t n_vocab = model_->hparams().n_vocab;
  RETURN_IF_ERROR(Validate(*state, tokens));
  const int64_t start_pos = state->n_past_;
  const size_t max_tokens = static_cast<size_t>(options_.max_step_tokens);
  for (size_t i = 0; i < tokens.size(); i += max_tokens) {
    const size_t n = std::min(max_tokens, tokens.size() - i);
    const bool last = i + n == tokens.size();
    float* out = logits == nullptr ? nullptr
                 : all_logits      ? logits + i * n_vocab
                                   : (last ? logits : nullptr);
    SequenceStep step{state, tokens.subspan(i, n), out, all_logits, prompt};
    absl::Status status = Step({&step, 1});
    if (!status.ok()) {
      state->n_past_ = start_pos;
      return status;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Forward::PlanStep(std::span<const SequenceStep> steps) {
  if (steps.empty()) return absl::InvalidArgumentError("a step needs at least one sequence");
  int64_t rows = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const SequenceStep& step = steps[i];
    if (step.state == nullptr) return absl::InvalidArgumentError("a step without a sequence");
    for (size_t j = 0; j < i; ++j) {
      if (steps[j].state == step.state) {
        return absl::InvalidArgumentError(
            absl::StrCat("sequences ", j, " and ", i, " of the step are the same sequence"));
      }
    }
    RETURN_IF_ERROR(Validate(*step.state, step.tokens));
    rows += static_cast<int64_t>(step.tokens.size());
  }
  if (rows > options_.max_step_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("a step carries at most ",
                                                   options_.max_step_tokens,
                                                   " tokens over all its sequences, not ", rows));
  }
  // Every sequence has a token, so there are at most rows sequences.
  int64_t row = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    ws_->first_row[i] = row;
    const int64_t n = static_cast<int64_t>(steps[i].tokens.size());
    std::fill_n(ws_->row_paths.begin() + row, n,
                steps[i].prompt ? kernels::ProductPath::kMatrix : kernels::ProductPath::kVector);
    row += n;
  }
  ws_->first_row[steps.size()] = row;
  return rows;
}

absl::Status Forward::Step(std::span<const SequenceStep> steps) {
  const HParams& hp = model_->hparams();
  last_step_ = StepStats{};
  ASSIGN_OR_RETURN(const int64_t n, PlanStep(steps));
  last_step_.sequences = static_cast<int64_t>(steps.size());
  last_step_.tokens = n;
  // A decode step: router lookahead predicts per row.
  const bool decode = n == static_cast<int64_t>(steps.size());
  ws_->lookahead_layer = -1;

  ChunkLease global(store_, model_->globals().chunk, device_);
  RETURN_IF_ERROR(global.Acquire());
  for (const SequenceStep& step : steps) {  // Before any position is stored.
    SequenceState* s = step.state;
    s->written_ = std::max(s->written_, s->n_past_ + static_cast<int64_t>(step.tokens.size()));
  }
  RETURN_IF_ERROR(Embed(steps, global));
  // Router lookahead where no MoE layer before it reads the guesses (see
  // set_router_lookahead): a first MoE layer from the embeddings, one after
  // a dense layer before that layer's FFN.
  const bool lookahead = router_lookahead_ && decode;
  if (lookahead && hp.n_layer > 0 && hp.IsMoeLayer(0)) RETURN_IF_ERROR(PrefetchGuesses(-1, n));
  for (int64_t l = 0; l < hp.n_layer; ++l) {
    const LayerTensors& layer = model_->layers()[l];
    RETURN_IF_ERROR(hp.is_mla() ? MlaAttention(steps, layer, l, n) : Attention(steps, layer, l, n));
    if (hp.IsMoeLayer(l)) {
      RETURN_IF_ERROR(MoeFeedForward(layer, l, n, decode));
      continue;
    }
    if (lookahead && l + 1 < hp.n_layer && hp.IsMoeLayer(l + 1)) {
      RETURN_IF_ERROR(PrefetchGuesses(l, n));
    }
    RETURN_IF_ERROR(FeedForward(layer, l, n));
  }
  RETURN_IF_ERROR(Head(steps, global));
  for (const SequenceStep& step : steps) {
    step.state->n_past_ += static_cast<int64_t>(step.tokens.size());
  }
  return absl::OkStatus();
}

void Forward::PrefetchAfter(int64_t l, bool ffn) {
  const auto& layers = model_->layers();
  memory::ChunkId upcoming[4];
  size_t n = 0;
  // The rest of this layer, then the next layer: the store decides how far
  // ahead it actually reads.
  if (!ffn) upcoming[n++] = layers[l].ffn_chunk;
  for (int64_t next = l + 1; next < static_cast<int64_t>(layers.size()) && n < 3; ++next) {
    upcoming[n++] = layers[next].attn_chunk;
    if (n < 3) upcoming[n++] = layers[next].ffn_chunk;
  }
  PrefetchChunks(upcoming, n);
}

void Forward::PrefetchChunks(const memory::ChunkId* ids, size_t n, size_t needed_now) {
  needed_now = std::min(n, needed_now);
  if (device_ == nullptr) {
    store_->Prefetch(std::span<const memory::ChunkId>(ids, n), needed_now);
    return;
  }
  // Less the chunks on the device, in a copy: callers index their lists.
  WCHECK(n <= ws_->prefetch_ids.size()) << n << " chunks to prefetch";
  auto on_host = [this](memory::ChunkId id) { return !device_->OnDevice(id); };
  memory::ChunkId* const kept = ws_->prefetch_ids.data();
  memory::ChunkId* const kept_now = std::copy_if(ids, ids + needed_now, kept, on_host);
  memory::ChunkId* const end = std::copy_if(ids + needed_now, ids + n, kept_now, on_host);
  store_->Prefetch(std::span<const memory::ChunkId>(kept, end),
                   static_cast<size_t>(kept_now - kept));
}

namespace {

// Rows [b, b + the result) of n, at most kMaxProductRows, all on paths[b]'s
// path (null paths: all on the vector path).
int64_t PathRun(const kernels::ProductPath* paths, int64_t b, int64_t n,
                kernels::ProductPath* path) {
  const int64_t most = std::min(kMaxProductRows, n - b);
  *path = paths == nullptr ? kernels::ProductPath::kVector : paths[b];
  if (paths == nullptr) return most;
  int64_t rows = 1;
  while (rows < most && paths[b + rows] == *path) ++rows;
  return rows;
}

}  // namespace

absl::Status Forward::Product(const ChunkLease& chunk, const kernels::WeightView& w, const float* x,
                              int64_t x_stride, int64_t n, float* y, int64_t y_stride,
                              const kernels::ProductPath* paths) {
  const uint64_t offset = static_cast<const uint8_t*>(w.data) - chunk.slot();
  kernels::ProductPath path;
  for (int64_t b = 0, rows; b < n; b += rows) {
    rows = PathRun(paths, b, n, &path);
    const float* xb = x + b * x_stride;
    float* yb = y + b * y_stride;
    if (observer_ != nullptr) observer_->OnProduct(chunk.id(), offset, w, xb, x_stride, rows);
    RETURN_IF_ERROR(
        chunk.on_device()
            ? device_->MatMul(chunk.id(), offset, w, xb, x_stride, rows, yb, y_stride)
            : kernels::MatMul(w, xb, x_stride, rows, yb, y_stride, pool_, &ws_->matvec, path));
  }
  return absl::OkStatus();
}

absl::Status Forward::SharedProducts(const ChunkLease& chunk,
                                     std::span<const kernels::SharedProduct> products,
                                     const float* x, int64_t x_stride, int64_t n,
                                     const kernels::ProductPath* paths) {
  if (observer_ != nullptr || chunk.on_device()) {
    for (const kernels::SharedProduct& p : products) {
      RETURN_IF_ERROR(Product(chunk, p.w, x, x_stride, n, p.y, p.y_stride, paths));
    }
    return absl::OkStatus();
  }
  WCHECK(products.size() <= static_cast<size_t>(kernels::kMaxSharedProducts));
  kernels::SharedProduct piece[kernels::kMaxSharedProducts];
  kernels::ProductPath path;
  for (int64_t b = 0, rows; b < n; b += rows) {
    rows = PathRun(paths, b, n, &path);
    for (size_t i = 0; i < products.size(); ++i) {
      piece[i] = products[i];
      piece[i].y += b * products[i].y_stride;
    }
    RETURN_IF_ERROR(kernels::MatMulShared({piece, products.size()}, x + b * x_stride, x_stride,
                                          rows, pool_, &ws_->matvec, path));
  }
  return absl::OkStatus();
}

absl::Status Forward::Embed(std::span<const SequenceStep> steps, const ChunkLease& lease) {
  const uint8_t* global = lease.slot();
  const HParams& hp = model_->hparams();
  const GlobalTensors& g = model_->globals();
  StepWorkspace& ws = *ws_;
  ops::RopeParams rope = hp.rope;
  if (g.rope_freqs.present) rope.freq_factors = g.rope_freqs.F32(global);
  const int64_t table_floats = ops::RopeTableFloats(rope);
  for (size_t i = 0; i < steps.size(); ++i) {
    const SequenceStep& step = steps[i];
    for (size_t t = 0; t < step.tokens.size(); ++t) {
      // Each row at its own sequence's next position.
      const int64_t row = ws.first_row[i] + static_cast<int64_t>(t);
      const uint8_t* embedding;
      if (g.embd_separate()) {
        // Its own chunk, maybe left on disk: the store reads the one row.
        RETURN_IF_ERROR(store_->ReadPart(
            g.embd_chunk, g.token_embd.place.slot_offset + step.tokens[t] * g.token_embd.row_bytes,
            g.token_embd.row_bytes, ws.embd_row.data()));
        embedding = ws.embd_row.data();
      } else {
        embedding = g.token_embd.Data(global) + step.tokens[t] * g.token_embd.row_bytes;
      }
      if (!g.embd_separate() && lease.on_device()) {
        // The row comes down from VRAM (the table stays there for the head).
        ASSIGN_OR_RETURN(embedding,
                         device_->ReadRow(lease.id(), embedding - global, g.token_embd.row_bytes));
      }
      float* x = &ws.x[row * hp.n_embd];
      kernels::DequantizeRow(g.token_embd.type, embedding, x, hp.n_embd);
      if (hp.embd_scale != 0) ops::Scale(x, hp.embd_scale, hp.n_embd, x);
      const int64_t pos = step.state->n_past_ + static_cast<int64_t>(t);
      ops::RopeTableInit(rope, pos, &ws.rope_table[row * table_floats]);
      if (hp.has_rope_swa) {
        ops::RopeTableInit(hp.rope_swa, pos,
                           &ws.rope_table[ws.rope_table.size() / 2 + row * table_floats]);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Forward::Head(std::span<const SequenceStep> steps, const ChunkLease& lease) {
  const uint8_t* global = lease.slot();
  const HParams& hp = model_->hparams();
  const GlobalTensors& g = model_->globals();
  StepWorkspace& ws = *ws_;
  const int64_t d = hp.n_embd, n_vocab = hp.n_vocab;
  const kernels::WeightView output = lease.View(g.output);
  const float* norm = g.output_norm.F32(global);

  // Last-token logits: their rows gathered, max_logit_rows per MatMul (one
  // for a whole decode step of up to that many sessions).
  int64_t m = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].logits != nullptr && !steps[i].all_logits) {
      ws.head_sequences[m++] = static_cast<int32_t>(i);
    }
  }
  for (int64_t begin = 0; begin < m; begin += options_.max_logit_rows) {
    const int64_t rows = std::min(options_.max_logit_rows, m - begin);
    for (int64_t j = 0; j < rows; ++j) {
      const int32_t i = ws.head_sequences[begin + j];
      const int64_t last = ws.first_row[i + 1] - 1;
      ops::RmsNorm(&ws.x[last * d], norm, d, hp.rms_eps, &ws.xb[j * d]);
      ws.head_paths[j] = ws.row_paths[last];
    }
    // One row goes straight to its caller.
    float* out = rows == 1 ? steps[ws.head_sequences[begin]].logits : ws.logits.data();
    RETURN_IF_ERROR(
        Product(lease, output, ws.xb.data(), d, rows, out, n_vocab, ws.head_paths.data()));
    SoftcapLogits(out, rows * n_vocab);
    ++last_step_.head_matmuls;
    if (rows > 1) {
      for (int64_t j = 0; j < rows; ++j) {
        const float* row = &ws.logits[j * n_vocab];
        std::copy(row, row + n_vocab, steps[ws.head_sequences[begin + j]].logits);
      }
    }
  }
  // Every token's logits: the caller's rows are contiguous, so they are
  // written in place.
  for (size_t i = 0; i < steps.size(); ++i) {
    const SequenceStep& step = steps[i];
    if (step.logits == nullptr || !step.all_logits) continue;
    const int64_t first = ws.first_row[i], n = static_cast<int64_t>(step.tokens.size());
    for (int64_t b = 0; b < n; ++b) {
      ops::RmsNorm(&ws.x[(first + b) * d], norm, d, hp.rms_eps, &ws.xb[b * d]);
    }
    RETURN_IF_ERROR(
        Product(lease, output, ws.xb.data(), d, n, step.logits, n_vocab, &ws.row_paths[first]));
    SoftcapLogits(step.logits, n * n_vocab);
    ++last_step_.head_matmuls;
  }
  return absl::OkStatus();
}

void Forward::SoftcapLogits(float* logits, int64_t n) const {
  const float cap = model_->hparams().final_softcap;
  if (cap == 0) return;
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) logits[i] = cap * std::tanh(logits[i] * inv);
}

absl::Status Forward::Attention(std::span<const SequenceStep> steps, const LayerTensors& layer,
                                int64_t l, int64_t n) {
  const HParams& hp = model_->hparams();
  StepWorkspace& ws = *ws_;
  ChunkLease chunk(store_, layer.attn_chunk, device_);
  RETURN_IF_ERROR(chunk.Acquire());
  PrefetchAfter(l, /*ffn=*/false);
  const uint8_t* slot = chunk.slot();
  const int64_t qd = hp.q_dim(), kvd = hp.kv_dim(), hd = hp.head_dim;

  for (int64_t b = 0; b < n; ++b) {
    ops::RmsNorm(&ws.x[b * hp.n_embd], layer.attn_norm.F32(slot), hp.n_embd, hp.rms_eps,
                 &ws.xb[b * hp.n_embd]);
  }
  internal::ProductBatch qkv(device_, chunk);
  const kernels::SharedProduct qkv_products[] = {{chunk.View(layer.wq), ws.q.data(), qd},
                                                 {chunk.View(layer.wk), ws.k.data(), kvd},
                                                 {chunk.View(layer.wv), ws.v.data(), kvd}};
  RETURN_IF_ERROR(
      SharedProducts(chunk, qkv_products, ws.xb.data(), hp.n_embd, n, ws.row_paths.data()));
  RETURN_IF_ERROR(qkv.End());
  const int64_t table_floats = ops::RopeTableFloats(hp.rope);
  const ops::RopeParams& rope = hp.RopeOf(l);
  const float* tables =
      ws.rope_table.data() + (&rope == &hp.rope_swa ? ws.rope_table.size() / 2 : 0);
  for (int64_t b = 0; b < n; ++b) {
    float* q = &ws.q[b * qd];
    float* k = &ws.k[b * kvd];
    if (layer.bq.present) {
      ops::Add(q, layer.bq.F32(slot), qd, q);
      ops::Add(k, layer.bk.F32(slot), kvd, k);
      ops::Add(&ws.v[b * kvd], layer.bv.F32(slot), kvd, &ws.v[b * kvd]);
    }
    if (layer.q_norm.present) {
      for (int64_t h = 0; h < hp.n_head; ++h) {
        ops::RmsNorm(q + h * hd, layer.q_norm.F32(slot), hd, hp.rms_eps, q + h * hd);
      }
      for (int64_t h = 0; h < hp.n_head_kv; ++h) {
        ops::RmsNorm(k + h * hd, layer.k_norm.F32(slot), hd, hp.rms_eps, k + h * hd);
      }
    }
    const float* table = tables + b * table_floats;
    ops::RopeApply(rope, table, hp.n_head, static_cast<int>(hd), q, q);
    ops::RopeApply(rope, table, hp.n_head_kv, static_cast<int>(hd), k, k);
  }
  // Each sequence's rows against its own cache.
  ops::AttentionParams params = internal::AttentionParamsOf(hp);
  params.window = hp.AttentionWindow(l);
  if (layer.sinks.present) params.sinks = layer.sinks.F32(slot);
  for (size_t i = 0; i < steps.size(); ++i) {
    SequenceState* s = steps[i].state;
    const int64_t first = ws.first_row[i], rows = ws.first_row[i + 1] - first;
    ops::KvCacheLayer cache = s->kv_.Layer(l);
    ops::KvStore(cache, s->n_past_, rows, &ws.k[first * kvd], &ws.v[first * kvd]);
    ops::Attention(params, cache, &ws.q[first * qd], rows, s->n_past_, &ws.att[first * qd],
                   ws.attn_scratch.data(), static_cast<int64_t>(ws.attn_scratch.size()),
                   [this](int64_t count, absl::FunctionRef<void(int64_t, int64_t)> body) {
                     pool_->ParallelFor(count, body);
                   });
  }
  RETURN_IF_ERROR(Product(chunk, chunk.View(layer.wo), ws.att.data(), qd, n, ws.tmp.data(),
                          hp.n_embd, ws.row_paths.data()));
  if (layer.bo.present) ops::AddToRows(ws.tmp.data(), n, layer.bo.F32(slot), hp.n_embd);
  AddToResidual(layer.attn_post_norm, slot, n);
  return absl::OkStatus();
}

void Forward::AddToResidual(const TensorRef& post_norm, const uint8_t* slot, int64_t n) {
  const HParams& hp = model_->hparams();
  StepWorkspace& ws = *ws_;
  if (post_norm.present) {
    for (int64_t b = 0; b < n; ++b) {
      float* row = &ws.tmp[b * hp.n_embd];
      ops::RmsNorm(row, post_norm.F32(slot), hp.n_embd, hp.rms_eps, row);
    }
  }
  ops::Add(ws.x.data(), ws.tmp.data(), n * hp.n_embd, ws.x.data());
}

absl::Status Forward::FeedForward(const LayerTensors& layer, int64_t l, int64_t n) {
  const HParams& hp = model_->hparams();
  StepWorkspace& ws = *ws_;
  ChunkLease chunk(store_, layer.ffn_chunk, device_);
  RETURN_IF_ERROR(chunk.Acquire());
  PrefetchAfter(l, /*ffn=*/true);
  const uint8_t* slot = chunk.slot();
  for (int64_t b = 0; b < n; ++b) {
    ops::RmsNorm(&ws.x[b * hp.n_embd], layer.ffn_norm.F32(slot), hp.n_embd, hp.rms_eps,
                 &ws.xb[b * hp.n_embd]);
  }
  RETURN_IF_ERROR(GluFfn(chunk, layer.gate, layer.up, layer.down, n));
  AddToResidual(layer.ffn_post_norm, slot, n);
  return absl::OkStatus();
}

absl::Status Forward::GluFfn(const ChunkLease& chunk, const TensorRef& gate, const TensorRef& up,
                             const TensorRef& down, int64_t n) {
  StepWorkspace& ws = *ws_;
  const int64_t d = model_->hparams().n_embd, ff = gate.rows;
  internal::ProductBatch gate_up(device_, chunk);
  const kernels::SharedProduct gate_up_products[] = {{chunk.View(gate), ws.gate.data(), ff},
                                                     {chunk.View(up), ws.up.data(), ff}};
  RETURN_IF_ERROR(SharedProducts(chunk, gate_up_products, ws.xb.data(), d, n, ws.row_paths.data()));
  RETURN_IF_ERROR(gate_up.End());
  if (model_->hparams().ffn_gelu) {  // GeGLU.
    ops::Gelu(ws.gate.data(), n * ff, ws.gate.data());
    ops::Mul(ws.gate.data(), ws.up.data(), n * ff, ws.gate.data());
  } else {
    ops::SwiGlu(ws.gate.data(), ws.up.data(), n * ff, ws.gate.data());
  }
  return Product(chunk, chunk.View(down), ws.gate.data(), ff, n, ws.tmp.data(), d,
                 ws.row_paths.data());
}

}  // namespace waste::model
