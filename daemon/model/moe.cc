#include "daemon/model/moe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "common/status_macros.h"
#include "daemon/kernels/ops/ops.h"
#include "daemon/model/chunk_lease.h"
#include "daemon/model/forward.h"
#include "daemon/model/step_workspace.h"

namespace waste::model {
namespace {

namespace ops = kernels::ops;
using internal::ChunkLease;
using internal::ExpertRoute;
using internal::StepWorkspace;

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

// gpt-oss: the router's bias on each of n rows of logits.
void AddRouterBias(const LayerTensors& layer, const uint8_t* slot, int64_t n, int64_t n_expert,
                   float* logits) {
  if (layer.router_bias.present) ops::AddToRows(logits, n, layer.router_bias.F32(slot), n_expert);
}

// Adds an expert's bias row (at `offset` of its chunk's slot `base`) to each
// of `rows` rows of y; nothing without biases (`bias` absent).
void AddExpertBias(const TensorRef& bias, const uint8_t* base, uint64_t offset, int64_t rows,
                   float* y) {
  if (!bias.present) return;
  ops::AddToRows(y, rows, reinterpret_cast<const float*>(base + offset), bias.cols);
}

// An expert's hidden rows from its gate and up products: their biases,
// then SwiGLU (gpt-oss's clamped form where the model has it), into gate.
void ExpertHidden(const MoeParams& moe, const LayerTensors& layer, const ExpertRef& expert,
                  const uint8_t* base, int64_t rows, float* gate, float* up) {
  const int64_t n = rows * moe.n_ff_exp;
  AddExpertBias(layer.gate_exps_b, base, expert.gate_bias_offset, rows, gate);
  AddExpertBias(layer.up_exps_b, base, expert.up_bias_offset, rows, up);
  if (moe.swiglu_oai) {
    ops::SwiGluOai(gate, up, n, kOaiAlpha, kOaiLimit, gate);
  } else {
    ops::SwiGlu(gate, up, n, gate);
  }
}

}  // namespace

void RouteToken(const MoeParams& moe, float* logits, const float* bias, float* select, int32_t* ids,
                float* weights) {
  const int64_t n = moe.n_expert;
  float* probs = logits;
  if (moe.gating == ExpertGating::kSoftmax) {
    ops::Softmax(probs, n);
  } else if (moe.gating == ExpertGating::kSigmoid) {
    for (int64_t i = 0; i < n; ++i) probs[i] = 1.0f / (1.0f + std::exp(-probs[i]));
  }  // kSoftmaxChosen: the logits choose; the chosen ones' softmax weighs.
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
  if (moe.gating == ExpertGating::kSoftmaxChosen) ops::Softmax(weights, moe.n_expert_used);
  for (int64_t k = 0; k < moe.n_expert_used; ++k) {
    if (moe.norm_weights) weights[k] /= sum;
    if (moe.weights_scale != 0) weights[k] *= moe.weights_scale;
  }
}

absl::Status Forward::MoeFeedForward(const LayerTensors& layer, int64_t l, int64_t n, bool decode) {
  const HParams& hp = model_->hparams();
  const MoeParams& moe = hp.moe;
  StepWorkspace& ws = *ws_;
  const int64_t d = hp.n_embd, k = moe.n_expert_used;
  ChunkLease trunk(store_, layer.ffn_chunk, device_);
  RETURN_IF_ERROR(trunk.Acquire());
  const uint8_t* slot = trunk.slot();
  for (int64_t b = 0; b < n; ++b) {
    ops::RmsNorm(&ws.x[b * d], layer.ffn_norm.F32(slot), d, hp.rms_eps, &ws.xb[b * d]);
  }

  // Route every row (of every sequence in the step), then order the
  // (expert, row) pairs by expert: each expert is then read once and
  // applied to all of its rows, and every row sums its experts in id order
  // whatever else is in the step.
  RETURN_IF_ERROR(Product(trunk, trunk.View(layer.router), ws.xb.data(), d, n, ws.router.data(),
                          moe.n_expert, ws.row_paths.data()));
  AddRouterBias(layer, slot, n, moe.n_expert, ws.router.data());
  const float* bias = layer.expert_bias.present ? layer.expert_bias.F32(slot) : nullptr;
  for (int64_t b = 0; b < n; ++b) {
    RouteToken(moe, &ws.router[b * moe.n_expert], bias, ws.select.data(), &ws.route_ids[b * k],
               &ws.route_weights[b * k]);
    for (int64_t j = 0; j < k; ++j) {
      ws.routes[b * k + j] = {ws.route_ids[b * k + j], static_cast<int32_t>(b),
                              ws.route_weights[b * k + j]};
    }
  }
  // Score the previous layer's guess against each row's actual routing.
  if (ws.lookahead_layer == l) {
    moe_stats_.lookahead_layers += n;
    moe_stats_.lookahead_routed += n * k;
    for (int64_t b = 0; b < n; ++b) {
      const auto actual = ws.route_ids.begin() + b * k;
      for (int64_t j = 0; j < k; ++j) {
        moe_stats_.lookahead_hits += std::count(actual, actual + k, ws.lookahead_ids[b * k + j]);
      }
    }
  }
  ws.lookahead_layer = -1;
  ExpertRoute* const routes = ws.routes.data();
  ExpertRoute* const routes_end = routes + n * k;
  std::sort(routes, routes_end, [](const ExpertRoute& a, const ExpertRoute& b) {
    return a.expert != b.expert ? a.expert < b.expert : a.token < b.token;
  });
  size_t n_chunks = 0;
  for (auto r = routes; r != routes_end; ++r) {
    if (r == routes || r->expert != (r - 1)->expert) {
      ws.group_start[n_chunks] = static_cast<int32_t>(r - routes);
      ws.expert_chunks[n_chunks++] = layer.experts[r->expert].chunk;
    }
  }
  ws.group_start[n_chunks] = static_cast<int32_t>(n * k);
  const size_t n_experts = n_chunks;
  // Then the union of the next layer's predicted experts (decode steps with
  // lookahead on), which the store reads once this layer's experts are in...
  if (router_lookahead_ && decode && l + 1 < hp.n_layer && hp.IsMoeLayer(l + 1)) {
    RETURN_IF_ERROR(PredictNextExperts(l, n));
    n_chunks += GuessedExpertChunks(l, n, &ws.expert_chunks[n_chunks]);
  }
  // ...then the next layer's blocks, so the store knows what follows.
  if (l + 1 < hp.n_layer) {
    const LayerTensors& next = model_->layers()[l + 1];
    ws.expert_chunks[n_chunks++] = next.attn_chunk;
    ws.expert_chunks[n_chunks++] = next.ffn_chunk;
  }
  PrefetchChunks(ws.expert_chunks.data(), n_chunks, /*needed_now=*/n_experts);
  moe_stats_.moe_tokens += n;
  moe_stats_.routed += n * k;
  last_step_.routed += n * k;

  // The shared expert needs no read: it runs while the experts load.
  float* out = ws.moe_out.data();
  if (layer.gate_shexp.present) {
    RETURN_IF_ERROR(GluFfn(trunk, layer.gate_shexp, layer.up_shexp, layer.down_shexp, n));
    if (layer.gate_inp_shexp.present) {  // qwen2moe: a sigmoid gate per token.
      const float* gw = layer.gate_inp_shexp.F32(slot);
      for (int64_t b = 0; b < n; ++b) {
        float g = 0;
        for (int64_t i = 0; i < d; ++i) g += gw[i] * ws.xb[b * d + i];
        ops::Scale(&ws.tmp[b * d], 1.0f / (1.0f + std::exp(-g)), d, &ws.tmp[b * d]);
      }
    }
    std::copy(ws.tmp.begin(), ws.tmp.begin() + n * d, out);
  } else {
    std::fill(out, out + n * d, 0.0f);
  }

  // Experts run in the order their reads land: the lowest id whose chunk is
  // in memory, else the lowest id left (waiting for its read). Small steps
  // keep each route's output row and sum them in id order at the end;
  // large ones (prefill chunks) run in id order and add as they go. Either
  // way every row sums its experts in id order.
  const bool any_order = n <= internal::kAnyOrderMaxRows;
  std::fill(ws.group_done.begin(), ws.group_done.begin() + n_experts, 0);
  size_t first_left = 0;
  for (size_t left = n_experts; left > 0; --left) {
    while (ws.group_done[first_left]) ++first_left;
    if (any_order) {
      // Every one-row expert in VRAM, at once; then every one in memory now.
      size_t m = device_ != nullptr ? ReadyOneRowExperts(first_left, n_experts, true) : 0;
      if (m > 1) {
        RETURN_IF_ERROR(RunDeviceExpertsTogether(layer, m));
        left -= m - 1;
        continue;
      }
      m = ReadyOneRowExperts(first_left, n_experts, false);
      if (m > 1) {
        RETURN_IF_ERROR(RunExpertsTogether(layer, m));
        left -= m - 1;
        continue;
      }
    }
    size_t i = first_left;
    for (size_t j = first_left; any_order && j < n_experts; ++j) {
      if (!ws.group_done[j] && ExpertReady(ws.expert_chunks[j])) {
        i = j;
        break;
      }
    }
    ws.group_done[i] = 1;
    const auto begin = routes + ws.group_start[i], end = routes + ws.group_start[i + 1];
    float* rows_out = any_order ? &ws.expert_out[ws.group_start[i] * d] : ws.tmp.data();
    RETURN_IF_ERROR(RunExpert(layer, begin, end, rows_out));
    if (!any_order) AddExpertRows(begin, end, rows_out, out);
  }
  if (any_order) AddExpertRows(routes, routes_end, ws.expert_out.data(), out);
  ops::Add(ws.x.data(), out, n * d, ws.x.data());
  return absl::OkStatus();
}

bool Forward::ExpertReady(memory::ChunkId id) {
  return (device_ != nullptr && device_->OnDevice(id)) || store_->Ready(id);
}

void Forward::CountExpert(memory::ChunkId chunk) {
  const int64_t bytes = model_->chunks()[chunk].tensor_bytes;
  ++moe_stats_.expert_acquires;
  moe_stats_.expert_bytes += bytes;
  ++last_step_.expert_acquires;
  last_step_.expert_bytes += bytes;
}

size_t Forward::ReadyOneRowExperts(size_t first, size_t n_experts, bool on_device) {
  StepWorkspace& ws = *ws_;
  if (observer_ != nullptr) return 0;  // It sees every product on its own.
  const size_t cap =
      std::min<size_t>(internal::kMaxExpertsTogether,
                       ws.gate.size() / static_cast<size_t>(model_->hparams().moe.n_ff_exp));
  size_t m = 0;
  for (size_t i = first; i < n_experts && m < cap; ++i) {
    const memory::ChunkId chunk = ws.expert_chunks[i];
    const bool in_vram = device_ != nullptr && device_->OnDevice(chunk);
    if (!ws.group_done[i] && ws.group_start[i + 1] - ws.group_start[i] == 1 &&
        (on_device ? in_vram : !in_vram && store_->Ready(chunk))) {
      ws.experts_together[m++] = static_cast<int32_t>(i);
    }
  }
  return m;
}

absl::Status Forward::RunExpertsTogether(const LayerTensors& layer, size_t m) {
  StepWorkspace& ws = *ws_;
  const int64_t d = model_->hparams().n_embd, ff = model_->hparams().moe.n_ff_exp;
  std::optional<ChunkLease> leases[internal::kMaxExpertsTogether];
  kernels::OwnProduct* products = ws.expert_products.data();
  // Gate and up of expert j side by side (they share its row of xb), or
  // each tensor's run when their types differ (a MatMulEach takes one).
  const bool one_type = layer.gate_exps.type == layer.up_exps.type;
  for (size_t j = 0; j < m; ++j) {
    const size_t i = static_cast<size_t>(ws.experts_together[j]);
    ws.group_done[i] = 1;
    const ExpertRoute& route = ws.routes[ws.group_start[i]];
    const ExpertRef& expert = layer.experts[route.expert];
    leases[j].emplace(store_, expert.chunk, device_);
    RETURN_IF_ERROR(leases[j]->Acquire());
    CountExpert(expert.chunk);
    const uint8_t* base = leases[j]->slot();
    const float* x = &ws.xb[route.token * d];
    products[one_type ? 2 * j : j] = {layer.gate_exps.ViewAt(base + expert.gate_offset), x,
                                      &ws.gate[j * ff]};
    products[one_type ? 2 * j + 1 : m + j] = {layer.up_exps.ViewAt(base + expert.up_offset), x,
                                              &ws.up[j * ff]};
  }
  if (one_type) {
    RETURN_IF_ERROR(kernels::MatMulEach({products, 2 * m}, d, ff, 1, pool_, &ws.matvec));
  } else {
    RETURN_IF_ERROR(kernels::MatMulEach({products, m}, d, ff, 1, pool_, &ws.matvec));
    RETURN_IF_ERROR(kernels::MatMulEach({products + m, m}, d, ff, 1, pool_, &ws.matvec));
  }
  const MoeParams& moe = model_->hparams().moe;
  for (size_t j = 0; j < m; ++j) {
    const int32_t start = ws.group_start[ws.experts_together[j]];
    const ExpertRef& expert = layer.experts[ws.routes[start].expert];
    ExpertHidden(moe, layer, expert, leases[j]->slot(), 1, &ws.gate[j * ff], &ws.up[j * ff]);
    products[j] = {layer.down_exps.ViewAt(leases[j]->slot() + expert.down_offset), &ws.gate[j * ff],
                   &ws.expert_out[start * d]};
  }
  RETURN_IF_ERROR(kernels::MatMulEach({products, m}, ff, d, 1, pool_, &ws.matvec));
  for (size_t j = 0; j < m; ++j) {
    const int32_t start = ws.group_start[ws.experts_together[j]];
    const ExpertRef& expert = layer.experts[ws.routes[start].expert];
    AddExpertBias(layer.down_exps_b, leases[j]->slot(), expert.down_bias_offset, 1,
                  &ws.expert_out[start * d]);
  }
  return absl::OkStatus();
}

absl::Status Forward::RunDeviceExpertsTogether(const LayerTensors& layer, size_t m) {
  StepWorkspace& ws = *ws_;
  const int64_t d = model_->hparams().n_embd, ff = model_->hparams().moe.n_ff_exp;
  std::optional<ChunkLease> leases[internal::kMaxExpertsTogether];
  const ExpertRef* experts[internal::kMaxExpertsTogether];
  for (size_t j = 0; j < m; ++j) {
    const size_t i = static_cast<size_t>(ws.experts_together[j]);
    ws.group_done[i] = 1;
    experts[j] = &layer.experts[ws.routes[ws.group_start[i]].expert];
    leases[j].emplace(store_, experts[j]->chunk, device_);
    RETURN_IF_ERROR(leases[j]->Acquire());
    CountExpert(experts[j]->chunk);
  }
  internal::ProductBatch gate_up(device_, *leases[0]);
  for (size_t j = 0; j < m; ++j) {
    const uint8_t* base = leases[j]->slot();
    const float* x = &ws.xb[ws.routes[ws.group_start[ws.experts_together[j]]].token * d];
    RETURN_IF_ERROR(Product(*leases[j], layer.gate_exps.ViewAt(base + experts[j]->gate_offset), x,
                            d, 1, &ws.gate[j * ff], ff));
    RETURN_IF_ERROR(Product(*leases[j], layer.up_exps.ViewAt(base + experts[j]->up_offset), x, d, 1,
                            &ws.up[j * ff], ff));
  }
  RETURN_IF_ERROR(gate_up.End());
  internal::ProductBatch down(device_, *leases[0]);
  for (size_t j = 0; j < m; ++j) {
    const uint8_t* base = leases[j]->slot();
    ExpertHidden(model_->hparams().moe, layer, *experts[j], base, 1, &ws.gate[j * ff],
                 &ws.up[j * ff]);
    RETURN_IF_ERROR(Product(*leases[j], layer.down_exps.ViewAt(base + experts[j]->down_offset),
                            &ws.gate[j * ff], ff, 1,
                            &ws.expert_out[ws.group_start[ws.experts_together[j]] * d], d));
  }
  RETURN_IF_ERROR(down.End());
  for (size_t j = 0; j < m; ++j) {
    AddExpertBias(layer.down_exps_b, leases[j]->slot(), experts[j]->down_bias_offset, 1,
                  &ws.expert_out[ws.group_start[ws.experts_together[j]] * d]);
  }
  return absl::OkStatus();
}

absl::Status Forward::RunExpert(const LayerTensors& layer, const ExpertRoute* begin,
                                const ExpertRoute* end, float* rows_out) {
  StepWorkspace& ws = *ws_;
  const int64_t d = model_->hparams().n_embd, ff = model_->hparams().moe.n_ff_exp;
  const int64_t rows = end - begin;
  for (int64_t row = 0; row < rows; ++row) {
    const float* x = &ws.xb[begin[row].token * d];
    std::copy(x, x + d, &ws.moe_x[row * d]);
  }
  const ExpertRef& expert = layer.experts[begin->expert];
  ChunkLease chunk(store_, expert.chunk, device_);
  RETURN_IF_ERROR(chunk.Acquire());
  const uint8_t* base = chunk.slot();
  CountExpert(expert.chunk);
  internal::ProductBatch gate_up(device_, chunk);
  const kernels::SharedProduct gate_up_products[] = {
      {layer.gate_exps.ViewAt(base + expert.gate_offset), ws.gate.data(), ff},
      {layer.up_exps.ViewAt(base + expert.up_offset), ws.up.data(), ff}};
  RETURN_IF_ERROR(SharedProducts(chunk, gate_up_products, ws.moe_x.data(), d, rows));
  RETURN_IF_ERROR(gate_up.End());
  ExpertHidden(model_->hparams().moe, layer, expert, base, rows, ws.gate.data(), ws.up.data());
  RETURN_IF_ERROR(Product(chunk, layer.down_exps.ViewAt(base + expert.down_offset), ws.gate.data(),
                          ff, rows, rows_out, d));
  AddExpertBias(layer.down_exps_b, base, expert.down_bias_offset, rows, rows_out);
  return absl::OkStatus();
}

void Forward::AddExpertRows(const ExpertRoute* begin, const ExpertRoute* end, const float* rows_out,
                            float* out) const {
  const int64_t d = model_->hparams().n_embd;
  for (const ExpertRoute* r = begin; r != end; ++r, rows_out += d) {
    float* y = out + r->token * d;
    for (int64_t j = 0; j < d; ++j) y[j] += r->weight * rows_out[j];
  }
}

size_t Forward::GuessedExpertChunks(int64_t l, int64_t n, memory::ChunkId* out) const {
  const int64_t k = model_->hparams().moe.n_expert_used;
  const LayerTensors& next = model_->layers()[l + 1];
  const int64_t m = lookahead_guesses_ > 0 ? std::min<int64_t>(lookahead_guesses_, k) : (k + 1) / 2;
  // Likeliest first (every row's first choice, then every row's second...),
  // each expert once: the store reads them in this order, so the likeliest
  // start first.
  StepWorkspace& ws = *ws_;
  const auto guess = ws.lookahead_union.begin();
  auto guess_end = guess;
  for (int64_t j = 0; j < m; ++j) {
    for (int64_t b = 0; b < n; ++b) {
      const int32_t e = ws.lookahead_ids[b * k + j];
      if (std::find(guess, guess_end, e) == guess_end) *guess_end++ = e;
    }
  }
  for (auto e = guess; e != guess_end; ++e) *out++ = next.experts[*e].chunk;
  return static_cast<size_t>(guess_end - guess);
}

absl::Status Forward::PrefetchGuesses(int64_t l, int64_t n) {
  RETURN_IF_ERROR(PredictNextExperts(l, n));
  PrefetchChunks(ws_->expert_chunks.data(), GuessedExpertChunks(l, n, ws_->expert_chunks.data()));
  return absl::OkStatus();
}

absl::Status Forward::PredictNextExperts(int64_t l, int64_t n) {
  const HParams& hp = model_->hparams();
  StepWorkspace& ws = *ws_;
  const int64_t d = hp.n_embd, k = hp.moe.n_expert_used;
  const LayerTensors& next = model_->layers()[l + 1];
  ChunkLease trunk(store_, next.ffn_chunk, device_);
  RETURN_IF_ERROR(trunk.Acquire());
  const uint8_t* slot = trunk.slot();
  // x is layer l's residual after its attention (or the embeddings: l = -1);
  // router and select are free again once l's routes are recorded.
  for (int64_t b = 0; b < n; ++b) {
    ops::RmsNorm(&ws.x[b * d], next.ffn_norm.F32(slot), d, hp.rms_eps, &ws.lookahead_x[b * d]);
  }
  RETURN_IF_ERROR(Product(trunk, trunk.View(next.router), ws.lookahead_x.data(), d, n,
                          ws.router.data(), hp.moe.n_expert));
  AddRouterBias(next, slot, n, hp.moe.n_expert, ws.router.data());
  const float* bias = next.expert_bias.present ? next.expert_bias.F32(slot) : nullptr;
  for (int64_t b = 0; b < n; ++b) {
    RouteToken(hp.moe, &ws.router[b * hp.moe.n_expert], bias, ws.select.data(),
               &ws.lookahead_ids[b * k], &ws.lookahead_weights[b * k]);
  }
  ws.lookahead_layer = l + 1;
  return absl::OkStatus();
}

}  // namespace waste::model
