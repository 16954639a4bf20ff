// The forward pass of a transformer over a ChunkStore: token ids in, logits
// out, one batch of consecutive positions of one sequence at a time (a
// decode step is a batch of one; prefill runs batches of up to
// kMaxForwardBatch so each weight row is read once per batch).
//
// Mixture-of-experts layers (moe.cc) acquire only the routed experts' chunks:
// for a batch, the union of its tokens' experts, each acquired once and
// applied to every token routed to it, so a chunked prefill reads each
// expert at most once per layer per batch and gives the same logits as
// running the tokens one at a time. As soon as a layer's routing is known
// the chosen experts are passed to ChunkStore::Prefetch, before the first is
// computed. MLA layers (mla.cc) keep one compressed row per position in the
// KV cache.
#ifndef WASTE_DAEMON_MODEL_FORWARD_H_
#define WASTE_DAEMON_MODEL_FORWARD_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/cache/chunk_store.h"
#include "daemon/kernels/matvec.h"
#include "daemon/kernels/ops/attention.h"
#include "daemon/kernels/thread_pool.h"
#include "daemon/model/model.h"
#include "storage/aligned_buffer.h"

namespace waste::model {

inline constexpr int64_t kMaxForwardBatch = 32;

// The KV cache of one sequence: per layer, K and V for n_ctx positions. For
// MLA one row of kv_lora_rank + rope dims per position serves as both K and
// V (the attention output's first kv_lora_rank dims are the latent mix).
class KvCache {
 public:
  KvCache(const HParams& hp, int64_t n_ctx, kernels::ops::KvType type);
  kernels::ops::KvCacheLayer Layer(int64_t l) const;
  int64_t n_ctx() const { return n_ctx_; }
  uint64_t bytes() const { return buffer_.size(); }
  // Bytes a cache of this shape takes (for the memory plan).
  static uint64_t Bytes(const HParams& hp, int64_t n_ctx, kernels::ops::KvType type);

 private:
  int64_t n_ctx_;
  kernels::ops::KvType type_;
  int n_kv_head_, head_dim_;
  bool shared_kv_;        // MLA: V aliases K.
  uint64_t layer_bytes_;  // Of one of K or V.
  storage::AlignedBuffer buffer_;
};

// One token's choice at one MoE layer: routed to `expert` with `weight`.
struct ExpertRoute {
  int32_t expert;
  int32_t token;
  float weight;
};

// Everything one sequence needs besides the weights: its KV cache, its
// position, and the activation buffers of a batch. Allocated once; the
// forward pass allocates nothing.
class SequenceState {
 public:
  SequenceState(const Model& model, int64_t n_ctx, kernels::ops::KvType kv_type);

  int64_t n_past() const { return n_past_; }
  int64_t n_ctx() const { return kv_.n_ctx(); }
  // Forgets positions from `n` on (to reuse a cached prefix).
  void Truncate(int64_t n) { n_past_ = std::min(n_past_, n); }
  uint64_t bytes() const;

  // Scratch bytes besides the KV cache for a model (for the memory plan).
  static uint64_t ScratchBytes(const Model& model);

 private:
  friend class Forward;
  KvCache kv_;
  int64_t n_past_ = 0;
  std::vector<float> x_, xb_, q_, k_, v_, att_, tmp_, gate_, up_, rope_table_, attn_scratch_;
  // MLA: q_a output, and the per-head [nope | rope] query before absorption.
  std::vector<float> q_lora_, mla_q_;
  // MoE: router logits/probabilities, one token's selection scores,
  // gathered input rows of one expert, the block's output, the routes of a
  // batch (sorted by expert) and the distinct experts to acquire.
  std::vector<float> router_, select_, moe_x_, moe_out_;
  std::vector<ExpertRoute> routes_;
  std::vector<cache::ChunkId> expert_chunks_;
  std::vector<int32_t> route_ids_;
  std::vector<float> route_weights_;
  // Router lookahead (decode): the next layer's router input and the experts
  // it predicts for layer lookahead_layer_ (-1: no prediction pending).
  std::vector<float> lookahead_x_;
  std::vector<int32_t> lookahead_ids_;
  std::vector<float> lookahead_weights_;
  int64_t lookahead_layer_ = -1;
  kernels::Scratch matvec_scratch_;
};

// Counters of the MoE path, summed over the runs of one Forward.
struct MoeStats {
  int64_t routed = 0;           // (token, layer, expert) choices.
  int64_t expert_acquires = 0;  // Expert chunks acquired (once per batch each).
  int64_t expert_bytes = 0;     // Tensor bytes of the expert chunks acquired.
  int64_t moe_tokens = 0;       // (token, MoE layer) pairs.
  // Router lookahead: layers predicted, experts actually routed there, and
  // how many of those were predicted. Accuracy = hits / routed.
  int64_t lookahead_layers = 0;
  int64_t lookahead_routed = 0;
  int64_t lookahead_hits = 0;
  double lookahead_accuracy() const {
    return lookahead_routed > 0 ? double(lookahead_hits) / double(lookahead_routed) : 0;
  }
};

// One sequence's share of a step: up to kMaxForwardBatch tokens appended
// at its next positions.
struct SequenceStep {
  SequenceState* state = nullptr;
  std::span<const int32_t> tokens;
  // Logits of every token ([n, n_vocab]) when all_logits, else of the last
  // one ([n_vocab]); may be null when not needed.
  float* logits = nullptr;
  bool all_logits = false;
};

// Runs a model on a store with a thread pool; neither is owned.
class Forward {
 public:
  Forward(const Model* model, cache::ChunkStore* store, kernels::ThreadPool* pool)
      : model_(model), store_(store), pool_(pool) {}

  // Appends `tokens` to the sequence at positions n_past .. n_past+n-1 and
  // writes logits: of every token ([n, n_vocab]) when `all_logits`, else of
  // the last token only ([n_vocab]). A context overflow is OUT_OF_RANGE and
  // a weight read failure is returned as is; either way the sequence keeps
  // its previous n_past.
  absl::Status Run(SequenceState* state, std::span<const int32_t> tokens, float* logits,
                   bool all_logits = false);

  // Runs several sequences (sessions) through the model in one pass over
  // the layers: each layer's attention and FFN chunks are acquired once and
  // held while every sequence uses them, so concurrent sessions share every
  // chunk read. Each step has 1..kMaxForwardBatch tokens. Errors as Run;
  // on error no sequence advances.
  absl::Status Step(std::span<const SequenceStep> steps);

  const MoeStats& moe_stats() const { return moe_stats_; }

  // Router lookahead for decode steps (batches of one token): after layer
  // l's attention, layer l+1's router is applied to l's hidden state (with
  // l+1's ffn_norm) and its top-k are prefetched behind l's own experts, so
  // their reads start one layer early. The guess misses what l's FFN and
  // l+1's attention change; MoeStats counts how often it was right. Costs
  // one router matvec per layer, no extra reads of the trunk when it is
  // pinned (MoE plans pin it). Off by default; the engine turns it on per
  // ModelConfig.router_lookahead. Chunked prefill does not need it: a batch
  // routes to most experts anyway.
  void set_router_lookahead(bool on) { router_lookahead_ = on; }
  bool router_lookahead() const { return router_lookahead_; }

 private:
  absl::Status Validate(const SequenceState& s, std::span<const int32_t> tokens) const;
  void Embed(SequenceState* s, const uint8_t* global, std::span<const int32_t> tokens);
  absl::Status Head(SequenceState* s, const uint8_t* global, int64_t n, float* logits,
                    bool all_logits);
  absl::Status Attention(SequenceState* s, const LayerTensors& layer, int64_t l, int64_t n);
  absl::Status MlaAttention(SequenceState* s, const LayerTensors& layer, int64_t l, int64_t n);
  absl::Status FeedForward(SequenceState* s, const LayerTensors& layer, int64_t l, int64_t n);
  absl::Status MoeFeedForward(SequenceState* s, const LayerTensors& layer, int64_t l, int64_t n);
  // Predicts layer l+1's experts for a one-token batch into
  // s->lookahead_ids_ (see set_router_lookahead).
  absl::Status PredictNextExperts(SequenceState* s, int64_t l);
  // The dense SwiGLU FFN y = down(silu(gate x) * up x) of n rows of xb_ into
  // tmp_ (dense layers and shared experts).
  absl::Status SwiGluFfn(SequenceState* s, const uint8_t* slot, const TensorRef& gate,
                         const TensorRef& up, const TensorRef& down, int64_t n);
  void PrefetchAfter(int64_t l, bool ffn);

  const Model* model_;
  cache::ChunkStore* store_;
  kernels::ThreadPool* pool_;
  MoeStats moe_stats_;
  bool router_lookahead_ = false;
};

}  // namespace waste::model

#endif  // WASTE_DAEMON_MODEL_FORWARD_H_
