// The forward pass of a transformer over a ChunkStore: token ids in, logits
// out. One Step runs the tokens of one or more sequences (sessions) as one
// batch: their rows are laid end to end in one activation matrix, so every
// weight matrix is read once per step for all of them (kernels::MatMul reads
// each weight row once for the whole batch), and each chunk is acquired once
// per step. Only attention is per sequence: each sequence's rows attend over
// its own KV cache at its own positions. A row's result does not depend on
// the other rows of its step: a sequence gets bit-identical logits whether
// it is stepped alone or with others.
//
// Mixture-of-experts layers (moe.cc) acquire only the routed experts' chunks:
// for a step, the union of its rows' experts (over all its sequences), each
// acquired once and applied to every row routed to it, so a chunked prefill
// or a step of several sessions reads each expert at most once per layer.
// As soon as a layer's routing is known the chosen experts are passed to
// ChunkStore::Prefetch, before the first is computed. MLA layers (mla.cc)
// keep one compressed row per position in the KV cache.
#ifndef WASTE_DAEMON_MODEL_FORWARD_H_
#define WASTE_DAEMON_MODEL_FORWARD_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "daemon/cache/chunk_store.h"
#include "daemon/kernels/matvec.h"
#include "daemon/kernels/ops/attention.h"
#include "daemon/kernels/thread_pool.h"
#include "daemon/model/model.h"
#include "storage/aligned_buffer.h"

namespace waste::model {

// The most rows one product takes (kernels::MatMul's largest batch; a
// device's scratch is sized for it): a step with more rows runs each of its
// products in pieces of this many, the weights staying in memory between.
inline constexpr int64_t kMaxProductRows = kernels::kMaxBatch;
// The most token rows one Step carries in total over all its sequences.
inline constexpr int64_t kMaxStepTokens = 512;
// ForwardOptions' default. Where weights stream, every step reads them
// again, so the memory plan gives a prompt larger steps (kStreamingStepTokens)
// when the budget holds their activations: fewer reads per prompt token.
inline constexpr int64_t kDefaultStepTokens = kMaxProductRows;
inline constexpr int64_t kStreamingStepTokens = 256;
// The fewest tokens a request's prompt has to feed for its callers to mark
// them SequenceStep::prompt (the matrix unit's path): below, a prompt's
// products have too few rows for the matrix unit to pay (it is 3x slower
// than the vector loops at one row, 1.4-1.9x faster at 16). Decided per
// request, so that a request's path does not depend on what it is batched
// with.
inline constexpr int64_t kMatrixPromptTokens = 16;
// Whether a request with `to_feed` prompt tokens marks them prompt.
inline bool MatrixPrompt(int64_t to_feed) { return to_feed >= kMatrixPromptTokens; }

// The KV cache of one sequence: per layer, K and V for n_ctx positions. For
// MLA one row of kv_lora_rank + rope dims per position serves as both K and
// V (the attention output's first kv_lora_rank dims are the latent mix).
// A sliding-window layer holds a ring of its window + kMaxStepTokens rows
// (when that is less than n_ctx): Gemma 3's five windowed layers in six,
// gpt-oss's and Gemma 2's every other one, keep only what they attend to.
class KvCache {
 public:
  // rings false: every layer keeps every position (tests compare the two).
  KvCache(const HParams& hp, int64_t n_ctx, kernels::ops::KvType type, bool rings = true);
  kernels::ops::KvCacheLayer Layer(int64_t l) const;
  int64_t n_ctx() const { return n_ctx_; }
  kernels::ops::KvType type() const { return type_; }
  // MLA: one row per position serves as K and V (Layer(l).v == .k).
  bool shared_kv() const { return shared_kv_; }
  // Bytes one position takes in one of K or V of a layer.
  uint64_t position_bytes() const;
  uint64_t bytes() const { return buffer_.size(); }
  int64_t layers() const { return static_cast<int64_t>(rows_.size()); }
  // Rows layer l holds: n_ctx, or its ring's.
  int64_t rows(int64_t l) const { return rows_[l]; }
  // Whether, the latest position stored being written - 1, every ring still
  // holds the window a token at position n attends back over.
  bool HoldsWindowBefore(int64_t n, int64_t written) const;
  // Bytes a cache of this shape takes (for the memory plan).
  static uint64_t Bytes(const HParams& hp, int64_t n_ctx, kernels::ops::KvType type,
                        bool rings = true);

 private:
  // Rows of layer l: its ring's or n_ctx.
  static int64_t LayerRows(const HParams& hp, int64_t n_ctx, int64_t l, bool rings);

  int64_t n_ctx_;
  kernels::ops::KvType type_;
  int n_kv_head_, head_dim_;
  bool shared_kv_;  // MLA: V aliases K.
  std::vector<int64_t> rows_, windows_;
  std::vector<uint64_t> offsets_;  // Of each layer's K (V follows, of the same size).
  storage::AlignedBuffer buffer_;
};

// What one sequence owns: its KV cache and its position. The activations
// of a step belong to the Forward that runs it (see ForwardOptions), so a
// session costs only its cache.
class SequenceState {
 public:
  SequenceState(const Model& model, int64_t n_ctx, kernels::ops::KvType kv_type,
                bool kv_rings = true);

  int64_t n_past() const { return n_past_; }
  int64_t n_ctx() const { return kv_.n_ctx(); }
  // Forgets positions from `n` on (to reuse a cached prefix) and returns
  // the positions kept: n, or 0 when a sliding-window layer's ring no
  // longer holds the window before n (it is then computed again).
  int64_t Truncate(int64_t n);
  // The KV cache's bytes.
  uint64_t bytes() const { return kv_.bytes(); }

  // For saving and restoring a session (engine/session_store): the cache,
  // and positions 0 .. n - 1 declared filled after the caller wrote them.
  const KvCache& kv() const { return kv_; }
  void RestorePast(int64_t n) { n_past_ = written_ = std::clamp<int64_t>(n, 0, kv_.n_ctx()); }

 private:
  friend class Forward;
  KvCache kv_;
  int64_t n_past_ = 0;
  // 1 + the latest position stored since the cache was last emptied (the
  // rings hold the positions from written_ - their rows on).
  int64_t written_ = 0;
};

// Counters of the MoE path, summed over the runs of one Forward.
struct MoeStats {
  int64_t routed = 0;           // (token, layer, expert) choices.
  int64_t expert_acquires = 0;  // Expert chunks acquired (once per step each).
  int64_t expert_bytes = 0;     // Tensor bytes of the expert chunks acquired.
  int64_t moe_tokens = 0;       // (token, MoE layer) pairs.
  // Router lookahead: (token, layer) pairs predicted, experts actually
  // routed there, and how many of those were predicted. Accuracy = hits /
  // routed.
  int64_t lookahead_layers = 0;
  int64_t lookahead_routed = 0;
  int64_t lookahead_hits = 0;
  double lookahead_accuracy() const {
    return lookahead_routed > 0 ? double(lookahead_hits) / double(lookahead_routed) : 0;
  }
};

// What the last Step did, for a scheduler to read after each step.
struct StepStats {
  int64_t sequences = 0;
  int64_t tokens = 0;           // Rows of the step, over all its sequences.
  int64_t expert_acquires = 0;  // Distinct (layer, expert) chunks acquired.
  int64_t expert_bytes = 0;     // Their tensor bytes.
  int64_t routed = 0;           // (token, layer, expert) choices.
  int64_t head_matmuls = 0;     // MatMuls over the output matrix.
};

// Sizes of the step workspace a Forward allocates at construction.
struct ForwardOptions {
  // The most token rows one Step may carry over all its sequences,
  // 1..kMaxStepTokens. Activation buffers scale with it.
  int64_t max_step_tokens = kDefaultStepTokens;
  // Rows of the logits staging buffer ([rows, n_vocab] floats): the
  // last-token logits of up to this many sequences come out of one MatMul
  // over the output matrix; a step asking for more takes several. Capped at
  // max_step_tokens. (all_logits rows are written straight to the caller.)
  int64_t max_logit_rows = 16;
};

// One sequence's share of a step: tokens appended at its next positions.
struct SequenceStep {
  SequenceState* state = nullptr;
  std::span<const int32_t> tokens;
  // Logits of every token ([n, n_vocab]) when all_logits, else of the last
  // one ([n_vocab]); may be null when not needed.
  float* logits = nullptr;
  bool all_logits = false;
  // The tokens are given (a prompt's), not sampled. Their products may then
  // take the CPU's matrix unit (kernels::ProductPath::kMatrix: AMX, several
  // times the vector loops' rate on a prefill's many rows), whose sums round
  // differently: a token's results depend on this flag, never on the step
  // it shares, so a sequence gets the same logits alone and batched as long
  // as its caller says the same of its tokens.
  bool prompt = false;
};

class DeviceWeights;

// Each decode step of a model with a fused attn_kv_b (MlaParams::fused_kv_b)
// multiplies W_k_b copies derived at run time (fused_keys.h) instead of
// attn_kv_b's key rows: the bytes of those copies it reads, and the file's
// bytes it does not, every layer's. Zero for every other model.
struct DerivedWeightBytes {
  uint64_t read = 0;
  uint64_t replaced = 0;
};
DerivedWeightBytes DerivedWeightBytesPerToken(const Model& model);

// Sees the input of every weight product a Forward computes, before the
// product runs (calibration: `wasted imatrix` sums the squares of each
// matrix's input columns). Called on the thread that runs the step, in
// product order; `x` is valid only during the call.
class ProductObserver {
 public:
  virtual ~ProductObserver() = default;
  // `w` is the matrix at byte `offset` of chunk `chunk`'s slot (an expert's
  // slice, one head's matrix of MLA's stacked attn_k_b, ...); `x` holds
  // `n` input rows of w.cols floats, `x_stride` floats apart.
  virtual void OnProduct(memory::ChunkId chunk, uint64_t offset, const kernels::WeightView& w,
                         const float* x, int64_t x_stride, int64_t n) = 0;
};

namespace internal {
struct ExpertRoute;
struct StepWorkspace;
class ChunkLease;
}  // namespace internal

// Runs a model on a store with a thread pool; neither is owned. Owns the
// step workspace: every activation buffer, the rope tables, the attention
// and matvec scratch, the MoE routing buffers and the logits staging buffer,
// allocated once here for ForwardOptions' sizes (WorkspaceBytes), so no
// step allocates. Not thread-safe: one Run or Step at a time.
class Forward {
 public:
  Forward(const Model* model, cache::ChunkStore* store, kernels::ThreadPool* pool,
          const ForwardOptions& options = {});
  ~Forward();
  Forward(const Forward&) = delete;
  Forward& operator=(const Forward&) = delete;

  // Bytes of the workspace a Forward with these options allocates (for the
  // memory plan: once per model, besides each session's KV cache).
  static uint64_t WorkspaceBytes(const Model& model, const ForwardOptions& options = {});
  // What this one allocated (== WorkspaceBytes of its model and options).
  uint64_t workspace_bytes() const;
  const ForwardOptions& options() const { return options_; }

  // Appends `tokens` to the sequence at positions n_past .. n_past+n-1, in
  // steps of at most max_step_tokens, and writes logits: of every token
  // ([n, n_vocab]) when `all_logits`, else of the last token only
  // ([n_vocab]). A context overflow is OUT_OF_RANGE and a weight read
  // failure is returned as is; either way the sequence keeps its previous
  // n_past.
  // `prompt`: as SequenceStep's.
  absl::Status Run(SequenceState* state, std::span<const int32_t> tokens, float* logits,
                   bool all_logits = false, bool prompt = false);

  // Runs several sequences (sessions) through the model as one batch: their
  // tokens are consecutive rows (steps[0]'s, then steps[1]'s, ...) of every
  // matrix product, and each chunk is acquired once for all of them. Each
  // sequence has at least one token and the step at most max_step_tokens in
  // total (else INVALID_ARGUMENT); a sequence may appear once. Errors as Run;
  // on error no sequence advances.
  absl::Status Step(std::span<const SequenceStep> steps);

  // Summed over every step of this Forward.
  const MoeStats& moe_stats() const { return moe_stats_; }
  // Of the last Step (or the last step of the last Run).
  const StepStats& last_step() const { return last_step_; }

  // Router lookahead for decode steps (every sequence of the step has one
  // token): after layer l's attention, layer l+1's router is applied to
  // each row's hidden state (with l+1's ffn_norm) and the union of their
  // top-k is prefetched behind l's own experts, so the reads start one layer
  // early. The guess misses what l's FFN and l+1's attention change;
  // MoeStats counts, per row, how often it was right. A MoE layer after a
  // dense one is guessed the same way before the dense layer's FFN, and a
  // first layer that is MoE from the embeddings as soon as they are made,
  // so that the reads of a token's first MoE layer overlap what comes before
  // its routing instead of leaving the disk idle between tokens. Costs one router
  // MatMul per layer, no extra reads of the trunk when it is pinned (MoE
  // plans pin it). Off by default; the engine turns it on per
  // ModelConfig.router_lookahead. Prefill does not need it: a batch of
  // many tokens routes to most experts anyway.
  void set_router_lookahead(bool on) { router_lookahead_ = on; }
  bool router_lookahead() const { return router_lookahead_; }
  // How many of each row's predicted experts the lookahead reads ahead:
  // the first `per_row` by router score, likeliest first; >= top-k: all
  // of them; 0 (the default): half of top-k, rounded up. Half measured best
  // on both bench shapes (quiet Zen 5, 64 tokens, two runs each) when a
  // wrong guess cost a whole expert's read: mixtral 8 experts top-2 at 300
  // MiB 49.8/53.4 tok/s with 1 guess vs 45.3/45.9 with 2 and 44.8/51.8 off;
  // deepseek2 128 experts top-8 at 280 MiB 72.5/76.0 with 4 vs 69.8/70.9
  // with 8 and 72.2/75.2 off. Since the store stops a wrong guess at the
  // next routing (streaming_store.h), the count matters less: on a 1.3-1.5
  // GB/s disk deepseek2 reached 89-90 % of its read bound with 2, 4 or 8
  // guesses, mixtral 88 % with 1 and 87-89 % with 2.
  void set_lookahead_guesses(int per_row) { lookahead_guesses_ = per_row; }

  // The VRAM tier: chunks on `weights`' device are not acquired from the
  // store; their products run on the device (see device_weights.h). Null
  // (the default): every chunk comes from the store and runs on the CPU.
  // Not owned; must outlive the Forward or be reset first.
  void set_device_weights(DeviceWeights* weights) { device_ = weights; }
  DeviceWeights* device_weights() const { return device_; }

  // Shows every product's input to `observer` (null: none, the default).
  // Not owned; must outlive the Forward or be reset first.
  void set_product_observer(ProductObserver* observer) { observer_ = observer; }

 private:
  absl::Status Validate(const SequenceState& s, std::span<const int32_t> tokens) const;
  // Checks a step and fills the workspace's first-row table; returns its
  // total rows.
  absl::StatusOr<int64_t> PlanStep(std::span<const SequenceStep> steps);
  absl::Status Embed(std::span<const SequenceStep> steps, const internal::ChunkLease& global);
  absl::Status Head(std::span<const SequenceStep> steps, const internal::ChunkLease& global);
  // y = W x for n rows, W in `chunk` (view made from chunk.slot()): on the
  // device when the chunk lives there, else kernels::MatMul on the pool,
  // row i on paths[i] (null: every row on the vector path), a MatMul per run
  // of rows on one path.
  absl::Status Product(const internal::ChunkLease& chunk, const kernels::WeightView& w,
                       const float* x, int64_t x_stride, int64_t n, float* y, int64_t y_stride,
                       const kernels::ProductPath* paths = nullptr);
  // Products of several matrices of `chunk` with one input (Q, K and V; gate
  // and up), each as Product would compute it: on the CPU one
  // kernels::MatMulShared per run of rows on one path (the input quantized
  // once, one parallel loop).
  absl::Status SharedProducts(const internal::ChunkLease& chunk,
                              std::span<const kernels::SharedProduct> products, const float* x,
                              int64_t x_stride, int64_t n,
                              const kernels::ProductPath* paths = nullptr);
  // Head h's matrix of an MLA tensor (attn_k_b, attn_v_b, a fused
  // attn_kv_b's value rows) in the chunk's slot.
  using HeadView = absl::FunctionRef<kernels::WeightView(int64_t h)>;
  // The per-head products of an MLA tensor: head h multiplies x + h * x_head
  // into y + h * y_head, n rows each. On the CPU one kernels::MatMulEach (one
  // parallel loop for all heads), else Product per head. `observed` false:
  // not shown to the observer (a fused attn_kv_b's value rows; its input is
  // shown whole), never for a device chunk.
  absl::Status HeadProducts(const internal::ChunkLease& chunk, HeadView view, bool observed,
                            const float* x, int64_t x_head, int64_t x_stride, int64_t n, float* y,
                            int64_t y_head, int64_t y_stride);
  // Prefetch hints for the store, less the chunks on the device; the first
  // needed_now are what the step waits for next (ChunkStore::Prefetch).
  void PrefetchChunks(const memory::ChunkId* ids, size_t n, size_t needed_now = 0);
  // Layer l over the step's n rows (attention per sequence).
  absl::Status Attention(std::span<const SequenceStep> steps, const LayerTensors& layer, int64_t l,
                         int64_t n);
  absl::Status MlaAttention(std::span<const SequenceStep> steps, const LayerTensors& layer,
                            int64_t l, int64_t n);
  absl::Status FeedForward(const LayerTensors& layer, int64_t l, int64_t n);
  // x += tmp over n rows, tmp first RMS-normed by post_norm where present
  // (gemma2/3's post-attention and post-FFN norms, in `slot`).
  void AddToResidual(const TensorRef& post_norm, const uint8_t* slot, int64_t n);
  // Gemma 2's final soft-capping of n logits (nothing when the model has none).
  void SoftcapLogits(float* logits, int64_t n) const;
  // `decode`: every sequence of the step has one token (router lookahead).
  absl::Status MoeFeedForward(const LayerTensors& layer, int64_t l, int64_t n, bool decode);
  // Predicts layer l+1's experts for each of the n rows from ws.x (see
  // set_router_lookahead); l may be -1 (the first layer, from the
  // embeddings).
  absl::Status PredictNextExperts(int64_t l, int64_t n);
  // The chunks of layer l+1's predicted experts that the lookahead reads
  // ahead, each once, likeliest first, written at `out`; returns how many.
  size_t GuessedExpertChunks(int64_t l, int64_t n, memory::ChunkId* out) const;
  // Predicts layer l+1's experts (PredictNextExperts) and reads the guesses
  // ahead at once: where no MoE layer l queues them behind its own experts.
  absl::Status PrefetchGuesses(int64_t l, int64_t n);
  // True when the expert's chunk is on the device or in memory now.
  bool ExpertReady(memory::ChunkId id);
  // Counts one routed expert's use of its chunk in the step's and the
  // model's stats.
  void CountExpert(memory::ChunkId chunk);
  // Decode: the experts of the step (group indices of ws.group_start, from
  // `first` on, not yet done) that route one row and whose chunk is in host
  // memory now (on_device: in VRAM), into ws.experts_together (at most what
  // the workspace holds at once); returns how many.
  size_t ReadyOneRowExperts(size_t first, size_t n_experts, bool on_device);
  // The first m experts of ws.experts_together as one MatMulEach for gate
  // and up and one for down (two loops instead of two per expert), each
  // output row into ws.expert_out, as RunExpert computes it; marks them done.
  absl::Status RunExpertsTogether(const LayerTensors& layer, size_t m);
  // The same for experts in VRAM: every gate and up product as one device
  // batch, then every down product as another (two synchronizations for the
  // layer instead of two per expert), each as RunExpert computes it.
  absl::Status RunDeviceExpertsTogether(const LayerTensors& layer, size_t m);
  // One routed expert on its rows [begin, end) (of one expert) of xb: the
  // expert's output rows, in that order, into rows_out.
  absl::Status RunExpert(const LayerTensors& layer, const internal::ExpertRoute* begin,
                         const internal::ExpertRoute* end, float* rows_out);
  // out[token] += weight * row, for each route and its row of rows_out.
  void AddExpertRows(const internal::ExpertRoute* begin, const internal::ExpertRoute* end,
                     const float* rows_out, float* out) const;
  // The dense gated FFN y = down(act(gate x) * up x) of n rows of xb into
  // tmp (dense layers and shared experts), act SiLU (SwiGLU) or gemma's
  // GELU (GeGLU).
  absl::Status GluFfn(const internal::ChunkLease& chunk, const TensorRef& gate, const TensorRef& up,
                      const TensorRef& down, int64_t n);
  void PrefetchAfter(int64_t l, bool ffn);

  const Model* model_;
  cache::ChunkStore* store_;
  kernels::ThreadPool* pool_;
  ForwardOptions options_;
  std::unique_ptr<internal::StepWorkspace> ws_;
  MoeStats moe_stats_;
  StepStats last_step_;
  bool router_lookahead_ = false;
  int lookahead_guesses_ = 0;
  DeviceWeights* device_ = nullptr;
  ProductObserver* observer_ = nullptr;
};

}  // namespace waste::model

#endif  // WASTE_DAEMON_MODEL_FORWARD_H_
