// Internal: the per-ISA kernel table behind the dispatchers in ops.cc,
// rope.cc, attention.cc and fp16.cc. Not part of the public API.
//
// Each of ScalarKernels(), Avx2Kernels() and Avx512Kernels() lives in its
// own translation unit compiled with that ISA's flags. Dispatchers validate
// arguments first; kernels assume valid input (lengths >= 0, non-null where
// needed, documented aliasing).
#ifndef WASTE_DAEMON_KERNELS_OPS_KERNELS_INTERNAL_H_
#define WASTE_DAEMON_KERNELS_OPS_KERNELS_INTERNAL_H_

#include <cstdint>

#include "daemon/kernels/ops/isa.h"

namespace waste::kernels::ops::internal {

// One unit of grouped-query attention work: `n_q` query heads that share one
// KV head, for one query token attending to cache positions [0, n_pos).
struct AttentionUnit {
  const float* q;  // n_q rows, q_stride floats apart, head_dim each.
  int64_t q_stride;
  const void* k;  // Row j at k + j * kv_stride elements (f16 or f32).
  const void* v;
  int64_t kv_stride;  // Elements between consecutive positions.
  bool kv_f16;
  int64_t ring;  // > 0: position p at row p % ring (KvCacheLayer::ring).
  int64_t n_pos;
  int64_t first_pos;   // Positions first_pos .. n_pos - 1 are attended to.
  const float* sinks;  // n_q sink logits (attention sinks), or null.
  int head_dim;
  int n_q;  // 1..kMaxUnitHeads.
  float scale;
  float softcap;  // > 0: each scaled score s becomes softcap * tanh(s / softcap).
  float* out;     // n_q rows, out_stride floats apart.
  int64_t out_stride;
  float* scratch;  // AttentionUnitScratchFloats(head_dim) floats.
};

// Query heads processed together against one streamed K/V row.
inline constexpr int kMaxUnitHeads = 4;
// Positions per online-softmax block in the vector kernels.
inline constexpr int kAttentionBlock = 256;

inline constexpr int64_t AttentionUnitScratchFloats(int head_dim) {
  // Scores for a block, then per-head accumulators, each padded to 16 floats.
  return kMaxUnitHeads * (kAttentionBlock + ((head_dim + 15) / 16) * 16) + 16;
}

struct Kernels {
  // y = x * w / sqrt(mean(x^2) + eps); w may be null (no weight). x may == y.
  void (*rms_norm)(const float* x, const float* w, int64_t n, float eps, float* y);
  // y = (x - mean) / sqrt(var + eps) * w + b; w and b may be null. x may == y.
  void (*layer_norm)(const float* x, const float* w, const float* b, int64_t n, float eps,
                     float* y);
  // In place; n >= 1.
  void (*softmax)(float* x, int64_t n);
  void (*silu)(const float* x, int64_t n, float* y);
  void (*gelu)(const float* x, int64_t n, float* y);
  void (*swiglu)(const float* gate, const float* up, int64_t n, float* y);
  void (*add)(const float* a, const float* b, int64_t n, float* y);
  void (*mul)(const float* a, const float* b, int64_t n, float* y);
  void (*scale)(const float* x, float s, int64_t n, float* y);
  // Rotates the first n_rot dims of each of n_heads rows of head_dim floats
  // using a table from rope.cc's RopeCacheInit; neox selects the pairing.
  // x may == y; the unrotated tail is copied.
  void (*rope)(const float* table, bool neox, int n_rot, int64_t n_heads, int head_dim,
               const float* x, float* y);
  void (*half_to_float)(const uint16_t* src, int64_t n, float* dst);
  void (*float_to_half)(const float* src, int64_t n, uint16_t* dst);
  void (*attention_unit)(const AttentionUnit& unit);
};

const Kernels& ScalarKernels();
const Kernels& Avx2Kernels();
const Kernels& Avx512Kernels();

// The table for `isa` after ResolveIsa (kAuto -> best; CHECK-fails on an ISA
// this CPU cannot run).
const Kernels& KernelsFor(Isa isa);

}  // namespace waste::kernels::ops::internal

#endif  // WASTE_DAEMON_KERNELS_OPS_KERNELS_INTERNAL_H_
