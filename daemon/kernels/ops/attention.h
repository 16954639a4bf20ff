// Grouped-query attention over a per-layer KV cache, and the KV store.
//
// Layouts (row-major, contiguous):
//   q, out          [n_tokens, n_head, head_dim] f32
//   k, v (to store) [n_tokens, n_kv_head, head_dim] f32
//   cache K and V   [n_ctx, n_kv_head, head_dim] of f16 (default) or f32
// Query head h reads KV head h / (n_head / n_kv_head). Query token t sits at
// position pos0 + t and attends causally to cache positions 0 .. pos0 + t
// (with a window w: the last w of them), which must already be stored
// (KvStore the new tokens first). Attention sinks (gpt-oss) add one logit
// per head to the softmax's denominator and nothing to the output.
//
// Work is split across KV-head groups with a caller-supplied parallel-for
// (e.g. the kernels thread pool's ParallelFor); each index touches disjoint
// output rows and its own slice of the caller's scratch, so ranges may run
// concurrently. No allocation per call.
//
// Thread-safety: Attention only reads the cache; KvStore writes one
// position range. Callers order a step's KvStore before its Attention.
#ifndef WASTE_DAEMON_KERNELS_OPS_ATTENTION_H_
#define WASTE_DAEMON_KERNELS_OPS_ATTENTION_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "daemon/kernels/ops/isa.h"

namespace waste::kernels::ops {

enum class KvType { kF16, kF32 };

// Largest head_dim accepted (DeepSeek MLA's absorbed 576 fits).
inline constexpr int kMaxHeadDim = 1024;

// One layer's cache. Borrowed memory: the owner (the model's KV cache)
// allocates KvCacheBytes for each of k and v (of `ring` rows when set) and
// outlives every call.
struct KvCacheLayer {
  KvType type = KvType::kF16;
  void* k = nullptr;
  void* v = nullptr;
  int64_t n_ctx = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  // A sliding-window layer's ring: position p in row p % ring, so only the
  // last `ring` positions stored are held (ring >= the window + the tokens
  // a call stores before attending). 0: row p for every p < n_ctx.
  int64_t ring = 0;
  int64_t Row(int64_t pos) const { return ring > 0 ? pos % ring : pos; }
};

// Bytes of one of K or V for a layer.
int64_t KvCacheBytes(KvType type, int64_t n_ctx, int n_kv_head, int head_dim);

// Writes k and v ([n_tokens, n_kv_head, head_dim] f32) to positions
// pos .. pos + n_tokens - 1 (n_tokens <= the ring, if any), converting to
// f16 (round to nearest even) when the cache is f16.
void KvStore(const KvCacheLayer& cache, int64_t pos, int64_t n_tokens, const float* k,
             const float* v, Isa isa = Isa::kAuto);

struct AttentionParams {
  int n_head = 0;
  int n_kv_head = 0;  // Divides n_head.
  int head_dim = 0;   // 1 .. kMaxHeadDim; must equal the cache's.
  float scale = 0;    // Score scale; 0 means 1 / sqrt(head_dim).
  // Gemma 2's logit soft-capping: each scaled score s becomes
  // softcap * tanh(s / softcap) before the softmax. 0: none.
  float softcap = 0;
  // Sliding window: a query attends to the last `window` positions, its
  // own included. 0: all.
  int64_t window = 0;
  // n_head logits (unscaled) that join each head's softmax, or null.
  const float* sinks = nullptr;
};

// Calls body(begin, end) over disjoint ranges covering [0, n), possibly
// concurrently, and returns once all have finished.
using ParallelForFn =
    absl::FunctionRef<void(int64_t n, absl::FunctionRef<void(int64_t begin, int64_t end)> body)>;

// Runs body(0, n) on the calling thread.
void SerialFor(int64_t n, absl::FunctionRef<void(int64_t begin, int64_t end)> body);

// Floats of scratch Attention needs for these params (independent of the
// context length and of n_tokens).
int64_t AttentionScratchFloats(const AttentionParams& params);

// out = softmax(scale * q K^T, causal) V per head; see the layouts above.
// `scratch` holds at least `scratch_floats` >= AttentionScratchFloats(params)
// floats, is overwritten, and must not be shared with a concurrent call.
void Attention(const AttentionParams& params, const KvCacheLayer& cache, const float* q,
               int64_t n_tokens, int64_t pos0, float* out, float* scratch, int64_t scratch_floats,
               ParallelForFn parallel_for = SerialFor, Isa isa = Isa::kAuto);

}  // namespace waste::kernels::ops

#endif  // WASTE_DAEMON_KERNELS_OPS_ATTENTION_H_
