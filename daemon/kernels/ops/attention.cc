#include "daemon/kernels/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/logging.h"
#include "daemon/kernels/ops/fp16.h"
#include "daemon/kernels/ops/kernels_internal.h"

namespace waste::kernels::ops {
namespace {

using internal::AttentionUnit;
using internal::kMaxUnitHeads;

int64_t ElementBytes(KvType type) { return type == KvType::kF16 ? 2 : 4; }

// Query heads of one KV group are cut into chunks of at most kMaxUnitHeads;
// one chunk is one parallel work item. Splitting within a group keeps
// enough items for the threads when n_kv_head is small (MQA).
int ChunksPerGroup(const AttentionParams& p) {
  const int group = p.n_head / p.n_kv_head;
  return (group + kMaxUnitHeads - 1) / kMaxUnitHeads;
}

void CheckParams(const AttentionParams& p) {
  WCHECK(p.n_head > 0 && p.n_kv_head > 0 && p.n_head % p.n_kv_head == 0)
      << "attention n_head=" << p.n_head
      << " must be a positive multiple of n_kv_head=" << p.n_kv_head;
  WCHECK(p.head_dim >= 1 && p.head_dim <= kMaxHeadDim)
      << "attention head_dim=" << p.head_dim << " outside 1.." << kMaxHeadDim;
  WCHECK(p.scale >= 0) << "attention scale=" << p.scale;
  WCHECK(p.window >= 0) << "attention window=" << p.window;
  WCHECK(p.softcap >= 0) << "attention softcap=" << p.softcap;
}

}  // namespace

int64_t KvCacheBytes(KvType type, int64_t n_ctx, int n_kv_head, int head_dim) {
  return n_ctx * n_kv_head * head_dim * ElementBytes(type);
}

void SerialFor(int64_t n, absl::FunctionRef<void(int64_t begin, int64_t end)> body) {
  if (n > 0) body(0, n);
}

void KvStore(const KvCacheLayer& cache, int64_t pos, int64_t n_tokens, const float* k,
             const float* v, Isa isa) {
  WCHECK(cache.k != nullptr && cache.v != nullptr && k != nullptr && v != nullptr)
      << "KvStore needs cache and input buffers";
  WCHECK(pos >= 0 && n_tokens >= 0 && pos + n_tokens <= cache.n_ctx)
      << "KvStore positions " << pos << "+" << n_tokens << " outside n_ctx=" << cache.n_ctx;
  WCHECK(cache.ring == 0 || n_tokens <= cache.ring)
      << "KvStore of " << n_tokens << " tokens into a ring of " << cache.ring;
  const int64_t row_floats = cache.n_kv_head * cache.head_dim;
  // At most two runs: up to the ring's end, then from its start.
  for (int64_t done = 0; done < n_tokens;) {
    const int64_t row = cache.Row(pos + done);
    const int64_t rows =
        cache.ring > 0 ? std::min(n_tokens - done, cache.ring - row) : n_tokens - done;
    const int64_t n = rows * row_floats, offset = row * row_floats;
    const float* ks = k + done * row_floats;
    const float* vs = v + done * row_floats;
    if (cache.type == KvType::kF16) {
      FloatToHalfRow(ks, n, static_cast<Half*>(cache.k) + offset, isa);
      FloatToHalfRow(vs, n, static_cast<Half*>(cache.v) + offset, isa);
    } else {
      std::memcpy(static_cast<float*>(cache.k) + offset, ks, n * sizeof(float));
      std::memcpy(static_cast<float*>(cache.v) + offset, vs, n * sizeof(float));
    }
    done += rows;
  }
}

int64_t AttentionScratchFloats(const AttentionParams& params) {
  CheckParams(params);
  return static_cast<int64_t>(params.n_kv_head) * ChunksPerGroup(params) *
         internal::AttentionUnitScratchFloats(params.head_dim);
}

void Attention(const AttentionParams& params, const KvCacheLayer& cache, const float* q,
               int64_t n_tokens, int64_t pos0, float* out, float* scratch, int64_t scratch_floats,
               ParallelForFn parallel_for, Isa isa) {
  CheckParams(params);
  WCHECK(cache.k != nullptr && cache.v != nullptr) << "attention cache has no K/V memory";
  WCHECK(cache.n_kv_head == params.n_kv_head && cache.head_dim == params.head_dim)
      << "attention cache is [" << cache.n_kv_head << " x " << cache.head_dim << "], params want ["
      << params.n_kv_head << " x " << params.head_dim << "]";
  WCHECK(n_tokens >= 0 && pos0 >= 0 && pos0 + n_tokens <= cache.n_ctx)
      << "attention positions " << pos0 << "+" << n_tokens << " outside n_ctx=" << cache.n_ctx;
  WCHECK(q != nullptr && out != nullptr && scratch != nullptr) << "attention needs q/out/scratch";
  // A ring holds the window's positions for every token of the call.
  WCHECK(cache.ring == 0 || (params.window > 0 && params.window + n_tokens - 1 <= cache.ring))
      << "attention over a ring of " << cache.ring << " rows with window " << params.window
      << " for " << n_tokens << " tokens";
  const int64_t per_unit = internal::AttentionUnitScratchFloats(params.head_dim);
  const int chunks = ChunksPerGroup(params);
  const int64_t n_units = static_cast<int64_t>(params.n_kv_head) * chunks;
  WCHECK(scratch_floats >= n_units * per_unit)
      << "attention scratch has " << scratch_floats << " floats, needs " << n_units * per_unit;
  if (n_tokens == 0) return;

  const internal::Kernels& kernels = internal::KernelsFor(isa);
  const int group = params.n_head / params.n_kv_head;
  const int64_t token_stride = static_cast<int64_t>(params.n_head) * params.head_dim;
  const int64_t kv_stride = static_cast<int64_t>(params.n_kv_head) * params.head_dim;
  const int64_t elem = ElementBytes(cache.type);
  const float scale =
      params.scale != 0 ? params.scale : 1.0f / std::sqrt(static_cast<float>(params.head_dim));

  parallel_for(n_units, [&](int64_t begin, int64_t end) {
    for (int64_t unit = begin; unit < end; ++unit) {
      const int kv_head = static_cast<int>(unit / chunks);
      const int first = static_cast<int>(unit % chunks) * kMaxUnitHeads;
      const int head = kv_head * group + first;
      AttentionUnit u;
      u.q_stride = params.head_dim;
      u.k = static_cast<const char*>(cache.k) + kv_head * params.head_dim * elem;
      u.v = static_cast<const char*>(cache.v) + kv_head * params.head_dim * elem;
      u.kv_stride = kv_stride;
      u.kv_f16 = cache.type == KvType::kF16;
      u.ring = cache.ring;
      u.head_dim = params.head_dim;
      u.n_q = group - first < kMaxUnitHeads ? group - first : kMaxUnitHeads;
      u.scale = scale;
      u.softcap = params.softcap;
      u.out_stride = params.head_dim;
      u.scratch = scratch + unit * per_unit;
      u.sinks = params.sinks != nullptr ? params.sinks + head : nullptr;
      // Tokens run in order inside one unit so a unit owns its scratch.
      for (int64_t t = 0; t < n_tokens; ++t) {
        u.q = q + t * token_stride + static_cast<int64_t>(head) * params.head_dim;
        u.out = out + t * token_stride + static_cast<int64_t>(head) * params.head_dim;
        u.n_pos = pos0 + t + 1;
        u.first_pos = params.window > 0 && u.n_pos > params.window ? u.n_pos - params.window : 0;
        kernels.attention_unit(u);
      }
    }
  });
}

}  // namespace waste::kernels::ops
