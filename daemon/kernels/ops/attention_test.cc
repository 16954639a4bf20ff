#include "daemon/kernels/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "daemon/kernels/ops/fp16.h"
#include "daemon/kernels/ops/test_util.h"
#include "gtest/gtest.h"

namespace waste::kernels::ops {
namespace {

using testing::AllNear;
using testing::IsaParamName;
using testing::RandomVector;

// A KV cache for one layer that owns its memory, filled with random rows
// through KvStore.
struct TestCache {
  TestCache(KvType type, int64_t n_ctx, int n_kv_head, int head_dim, uint32_t seed)
      : k_mem(KvCacheBytes(type, n_ctx, n_kv_head, head_dim)),
        v_mem(KvCacheBytes(type, n_ctx, n_kv_head, head_dim)) {
    layer.type = type;
    layer.k = k_mem.data();
    layer.v = v_mem.data();
    layer.n_ctx = n_ctx;
    layer.n_kv_head = n_kv_head;
    layer.head_dim = head_dim;
    const int64_t n = n_ctx * n_kv_head * head_dim;
    const auto k = RandomVector(n, -1, 1, seed);
    const auto v = RandomVector(n, -1, 1, seed + 1);
    KvStore(layer, 0, n_ctx, k.data(), v.data());
  }
  std::vector<char> k_mem;
  std::vector<char> v_mem;
  KvCacheLayer layer;
};

// Splits [0, n) over two real threads, so concurrent units are exercised.
void TwoThreadFor(int64_t n, absl::FunctionRef<void(int64_t, int64_t)> body) {
  const int64_t mid = n / 2;
  std::thread t([&] {
    if (mid > 0) body(0, mid);
  });
  if (n > mid) body(mid, n);
  t.join();
}

std::vector<float> RunAttention(const AttentionParams& p, const KvCacheLayer& cache,
                                const std::vector<float>& q, int64_t n_tokens, int64_t pos0,
                                Isa isa, bool threaded) {
  std::vector<float> out(q.size(), NAN);
  std::vector<float> scratch(AttentionScratchFloats(p));
  if (threaded) {
    Attention(p, cache, q.data(), n_tokens, pos0, out.data(), scratch.data(), scratch.size(),
              TwoThreadFor, isa);
  } else {
    Attention(p, cache, q.data(), n_tokens, pos0, out.data(), scratch.data(), scratch.size(),
              SerialFor, isa);
  }
  return out;
}

struct Shape {
  int n_head, n_kv_head, head_dim;
};

class AttentionTest : public ::testing::TestWithParam<Isa> {};

TEST_P(AttentionTest, MatchesScalarReference) {
  const Shape shapes[] = {{4, 4, 64},  {8, 2, 128}, {32, 8, 128}, {6, 1, 80},  {5, 5, 17},
                          {12, 2, 33}, {2, 1, 8},   {16, 1, 256}, {10, 2, 72}, {3, 3, 1}};
  for (KvType type : {KvType::kF16, KvType::kF32}) {
    for (const Shape& s : shapes) {
      const int64_t n_ctx = 600;  // > 2 online-softmax blocks of 256.
      TestCache cache(type, n_ctx, s.n_kv_head, s.head_dim, s.head_dim * 31 + s.n_head);
      AttentionParams p{s.n_head, s.n_kv_head, s.head_dim};
      struct Case {
        int64_t n_tokens, pos0;
      };
      for (Case c : {Case{1, 0}, Case{1, 255}, Case{1, 256}, Case{1, 599}, Case{5, 300}}) {
        SCOPED_TRACE(::testing::Message() << "f16=" << (type == KvType::kF16) << " heads="
                                          << s.n_head << "/" << s.n_kv_head << " dim=" << s.head_dim
                                          << " tokens=" << c.n_tokens << " pos0=" << c.pos0);
        // Large q so the softmax is peaky, not a near-uniform average.
        const auto q = RandomVector(c.n_tokens * s.n_head * s.head_dim, -4, 4, c.pos0 + 1);
        const auto want = RunAttention(p, cache.layer, q, c.n_tokens, c.pos0, Isa::kScalar, false);
        const auto got = RunAttention(p, cache.layer, q, c.n_tokens, c.pos0, GetParam(), true);
        EXPECT_TRUE(AllNear(got, want, 1e-4f, 2e-5f));
      }
    }
  }
}

TEST_P(AttentionTest, SinglePositionReturnsItsValue) {
  TestCache cache(KvType::kF32, 4, 2, 24, 3);
  AttentionParams p{4, 2, 24};
  const auto q = RandomVector(4 * 24, -1, 1, 4);
  const auto out = RunAttention(p, cache.layer, q, 1, 0, GetParam(), false);
  const float* v = static_cast<const float*>(cache.layer.v);
  for (int h = 0; h < 4; ++h) {
    EXPECT_TRUE(AllNear(out.data() + h * 24, v + (h / 2) * 24, 24, 1e-6f, 1e-7f)) << h;
  }
}

TEST_P(AttentionTest, ZeroQueryAveragesValues) {
  const int64_t n_ctx = 300;
  TestCache cache(KvType::kF16, n_ctx, 1, 16, 5);
  AttentionParams p{2, 1, 16};
  const std::vector<float> q(2 * 16, 0.0f);
  const auto out = RunAttention(p, cache.layer, q, 1, n_ctx - 1, GetParam(), false);
  std::vector<float> mean(16, 0.0f);
  const Half* v = static_cast<const Half*>(cache.layer.v);
  for (int64_t pos = 0; pos < n_ctx; ++pos) {
    for (int i = 0; i < 16; ++i) mean[i] += HalfToFloat(v[pos * 16 + i]) / n_ctx;
  }
  EXPECT_TRUE(AllNear(out.data(), mean.data(), 16, 1e-4f, 1e-6f));
  EXPECT_TRUE(AllNear(out.data() + 16, mean.data(), 16, 1e-4f, 1e-6f));
}

TEST_P(AttentionTest, CausalIgnoresLaterPositions) {
  TestCache cache(KvType::kF16, 64, 2, 32, 6);
  AttentionParams p{4, 2, 32};
  const auto q = RandomVector(4 * 32, -2, 2, 7);
  const auto before = RunAttention(p, cache.layer, q, 1, 20, GetParam(), false);
  // Overwrite positions 21.. with different rows; position 20's output must not move.
  const auto junk = RandomVector(43 * 2 * 32, -5, 5, 8);
  KvStore(cache.layer, 21, 43, junk.data(), junk.data());
  const auto after = RunAttention(p, cache.layer, q, 1, 20, GetParam(), false);
  EXPECT_TRUE(AllNear(after, before, 0, 0));
}

// A window of w: positions before the last w do not count, over blocks of
// the online softmax too, and the vector loops agree with the scalar one.
TEST_P(AttentionTest, WindowIgnoresEarlierPositions) {
  TestCache cache(KvType::kF16, 600, 2, 32, 9);
  AttentionParams p{4, 2, 32};
  p.window = 300;
  const auto q = RandomVector(3 * 4 * 32, -3, 3, 10);
  const auto before = RunAttention(p, cache.layer, q, 3, 400, GetParam(), true);
  EXPECT_TRUE(
      AllNear(before, RunAttention(p, cache.layer, q, 3, 400, Isa::kScalar, false), 1e-4f, 2e-5f));
  // Token 0 at 400 sees 101..400: rewriting 0..100 moves nothing.
  const auto junk = RandomVector(101 * 2 * 32, -5, 5, 11);
  KvStore(cache.layer, 0, 101, junk.data(), junk.data());
  EXPECT_TRUE(AllNear(RunAttention(p, cache.layer, q, 3, 400, GetParam(), true), before, 0, 0));
  // Position 101 is token 0's oldest: rewriting it moves token 0, not token 1.
  KvStore(cache.layer, 101, 1, junk.data(), junk.data());
  const auto after = RunAttention(p, cache.layer, q, 3, 400, GetParam(), true);
  EXPECT_FALSE(AllNear(after.data(), before.data(), 4 * 32, 1e-6f, 0));
  EXPECT_TRUE(AllNear(after.data() + 4 * 32, before.data() + 4 * 32, 2 * 4 * 32, 0, 0));
}

// A sink s joins the softmax's denominator only: over one position with
// score z the output is v * e^z / (e^z + e^s); the vector loops agree with
// the scalar one over several blocks.
TEST_P(AttentionTest, SinksScaleTheOutputDown) {
  TestCache cache(KvType::kF32, 600, 1, 16, 12);
  const std::vector<float> sinks = {0.5f, -2.0f};
  AttentionParams p{2, 1, 16};
  p.sinks = sinks.data();
  const std::vector<float> q(2 * 16, 0.0f);  // Score 0 at every position.
  const auto out = RunAttention(p, cache.layer, q, 1, 0, GetParam(), false);
  const float* v = static_cast<const float*>(cache.layer.v);
  for (int h = 0; h < 2; ++h) {
    const float share = 1.0f / (1.0f + std::exp(sinks[h]));
    for (int i = 0; i < 16; ++i) EXPECT_NEAR(out[h * 16 + i], v[i] * share, 1e-6f) << h;
  }
  const auto q2 = RandomVector(2 * 2 * 16, -4, 4, 13);
  EXPECT_TRUE(AllNear(RunAttention(p, cache.layer, q2, 2, 550, GetParam(), true),
                      RunAttention(p, cache.layer, q2, 2, 550, Isa::kScalar, false), 1e-4f, 2e-5f));
}

// Soft-capping (gemma2): the softmax of c * tanh(s / c) instead of s. Two
// positions with scores s0 and s1 weigh their values by the softmax of the
// capped scores; the vector loops agree with the scalar one over blocks.
TEST_P(AttentionTest, SoftcapBoundsTheScores) {
  TestCache cache(KvType::kF32, 600, 1, 8, 14);
  AttentionParams p{1, 1, 8};
  p.scale = 1.0f;
  p.softcap = 2.0f;
  std::vector<float> q(8, 0.0f);
  q[0] = 40.0f;  // Scores 40 k[0]: far beyond the cap.
  const auto out = RunAttention(p, cache.layer, q, 1, 1, GetParam(), false);
  const float* k = static_cast<const float*>(cache.layer.k);
  const float* v = static_cast<const float*>(cache.layer.v);
  const float z0 = 2.0f * std::tanh(40.0f * k[0] / 2.0f);
  const float z1 = 2.0f * std::tanh(40.0f * k[8] / 2.0f);
  const float w0 = 1.0f / (1.0f + std::exp(z1 - z0));
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(out[i], w0 * v[i] + (1 - w0) * v[8 + i], 1e-5f) << i;
  const auto q2 = RandomVector(3 * 8, -30, 30, 15);
  EXPECT_TRUE(AllNear(RunAttention(p, cache.layer, q2, 3, 500, GetParam(), true),
                      RunAttention(p, cache.layer, q2, 3, 500, Isa::kScalar, false), 1e-4f, 2e-5f));
}
// A windowed layer's ring of R rows (position p in row p % R) gives what a
// full cache gives: stores of several tokens wrapping its end, windows whose
// rows wrap (and online-softmax blocks cut at the wrap), several tokens per
// call, f16 and f32.
TEST_P(AttentionTest, RingEqualsFullCache) {
  constexpr int kHeads = 4, kKvHeads = 2, kDim = 40;
  constexpr int64_t kCtx = 2000, kWindow = 300, kRing = kWindow + 16;
  for (KvType type : {KvType::kF16, KvType::kF32}) {
    std::vector<char> fk(KvCacheBytes(type, kCtx, kKvHeads, kDim)), fv(fk.size());
    std::vector<char> rk(KvCacheBytes(type, kRing, kKvHeads, kDim)), rv(rk.size());
    KvCacheLayer full{type, fk.data(), fv.data(), kCtx, kKvHeads, kDim};
    KvCacheLayer ring{type, rk.data(), rv.data(), kCtx, kKvHeads, kDim, kRing};
    AttentionParams p{kHeads, kKvHeads, kDim};
    p.window = kWindow;
    int64_t pos = 0;
    uint32_t seed = 20;
    for (int64_t step : {7, 16, 1, 290, 16, 16, 3, 200, 16, 1, 1, 500, 16}) {
      // Store `step` tokens in pieces of at most 16 (the ring's slack), then
      // attend with the last piece's tokens.
      for (int64_t done = 0; done < step;) {
        const int64_t n = std::min<int64_t>(16, step - done);
        const auto k = RandomVector(n * kKvHeads * kDim, -1, 1, ++seed);
        const auto v = RandomVector(n * kKvHeads * kDim, -1, 1, ++seed);
        KvStore(full, pos, n, k.data(), v.data());
        KvStore(ring, pos, n, k.data(), v.data());
        const auto q = RandomVector(n * kHeads * kDim, -3, 3, ++seed);
        SCOPED_TRACE(::testing::Message()
                     << "f16=" << (type == KvType::kF16) << " pos=" << pos << " tokens=" << n);
        // (The vector loops' blocks end at the wrap: sums in another order.)
        EXPECT_TRUE(AllNear(RunAttention(p, ring, q, n, pos, GetParam(), true),
                            RunAttention(p, full, q, n, pos, GetParam(), true), 1e-5f, 1e-6f));
        EXPECT_TRUE(AllNear(RunAttention(p, ring, q, n, pos, Isa::kScalar, false),
                            RunAttention(p, full, q, n, pos, Isa::kScalar, false), 0, 0));
        pos += n;
        done += n;
      }
    }
    ASSERT_GT(pos, 3 * kRing);
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, AttentionTest, ::testing::ValuesIn(AvailableIsas()),
                         IsaParamName);

TEST(KvStoreTest, WritesRoundedRowsAtPosition) {
  const int n_kv_head = 2, head_dim = 5;
  std::vector<Half> k(8 * n_kv_head * head_dim, 0), v(k.size(), 0);
  KvCacheLayer cache{KvType::kF16, k.data(), v.data(), 8, n_kv_head, head_dim};
  const auto kin = RandomVector(2 * n_kv_head * head_dim, -3, 3, 9);
  const auto vin = RandomVector(kin.size(), -3, 3, 10);
  KvStore(cache, 3, 2, kin.data(), vin.data());
  const int64_t row = n_kv_head * head_dim;
  for (int64_t i = 0; i < 2 * row; ++i) {
    EXPECT_EQ(k[3 * row + i], FloatToHalf(kin[i]));
    EXPECT_EQ(v[3 * row + i], FloatToHalf(vin[i]));
  }
  for (int64_t i = 0; i < 3 * row; ++i) EXPECT_EQ(k[i], 0);
  for (int64_t i = 5 * row; i < 8 * row; ++i) EXPECT_EQ(v[i], 0);
}

TEST(AttentionDeathTest, RejectsBadShapes) {
  TestCache cache(KvType::kF16, 8, 2, 16, 11);
  std::vector<float> q(6 * 16), out(q.size());
  AttentionParams bad_group{6, 4, 16};
  std::vector<float> scratch(100000);
  EXPECT_DEATH(
      Attention(bad_group, cache.layer, q.data(), 1, 0, out.data(), scratch.data(), scratch.size()),
      "multiple");
  AttentionParams p{4, 2, 16};
  EXPECT_DEATH(
      Attention(p, cache.layer, q.data(), 2, 7, out.data(), scratch.data(), scratch.size()),
      "n_ctx");
  EXPECT_DEATH(Attention(p, cache.layer, q.data(), 1, 0, out.data(), scratch.data(), 1), "scratch");
}

}  // namespace
}  // namespace waste::kernels::ops
