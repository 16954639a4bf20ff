#include "daemon/kernels/ops/rope.h"

#include <cmath>
#include <vector>

#include "daemon/kernels/ops/test_util.h"
#include "gtest/gtest.h"

namespace waste::kernels::ops {
namespace {

using testing::AllNear;
using testing::IsaParamName;
using testing::RandomVector;

// ggml's CPU rope (ggml-cpu ops.cpp: rope_yarn, ggml_rope_cache_init,
// rotate_pairs) re-derived independently, in float with the iterated theta,
// as the semantic oracle for RopeTableInit + RopeApply.
void GgmlStyleRope(const RopeParams& p, int64_t pos, int n_heads, int head_dim, const float* x,
                   float* y) {
  float corr[2] = {0, 0};
  if (p.ext_factor != 0) {
    RopeYarnCorrDims(p.n_rot, p.n_ctx_orig, p.freq_base, p.beta_fast, p.beta_slow, corr);
  }
  const float theta_scale = std::pow(p.freq_base, -2.0f / p.n_rot);
  std::vector<float> cache(head_dim + 2);
  float theta = static_cast<float>(pos);
  for (int i0 = 0; i0 < head_dim; i0 += 2) {
    const float ff = (p.freq_factors != nullptr && i0 < p.n_rot) ? p.freq_factors[i0 / 2] : 1.0f;
    const float theta_extrap = theta / ff;
    const float theta_interp = p.freq_scale * theta_extrap;
    float th = theta_interp;
    float mscale = p.attn_factor;
    if (p.ext_factor != 0) {
      const float yy = (i0 / 2 - corr[0]) / std::max(0.001f, corr[1] - corr[0]);
      const float ramp_mix = (1 - std::min(1.0f, std::max(0.0f, yy))) * p.ext_factor;
      th = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix;
      mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
    }
    cache[i0] = std::cos(th) * mscale;
    cache[i0 + 1] = std::sin(th) * mscale;
    theta *= theta_scale;
  }
  for (int h = 0; h < n_heads; ++h) {
    const float* src = x + h * head_dim;
    float* dst = y + h * head_dim;
    for (int i0 = 0; i0 < p.n_rot; i0 += 2) {
      const int a = p.mode == RopeMode::kNeox ? i0 / 2 : i0;
      const int b = p.mode == RopeMode::kNeox ? i0 / 2 + p.n_rot / 2 : i0 + 1;
      const float c = cache[i0], s = cache[i0 + 1];
      const float x0 = src[a], x1 = src[b];
      dst[a] = x0 * c - x1 * s;
      dst[b] = x0 * s + x1 * c;
    }
    for (int i = p.n_rot; i < head_dim; ++i) dst[i] = src[i];
  }
}

std::vector<float> Apply(const RopeParams& p, int64_t pos, int n_heads, int head_dim,
                         const std::vector<float>& x, Isa isa) {
  std::vector<float> table(RopeTableFloats(p));
  RopeTableInit(p, pos, table.data());
  std::vector<float> y(x.size());
  RopeApply(p, table.data(), n_heads, head_dim, x.data(), y.data(), isa);
  return y;
}

struct Variant {
  const char* name;
  RopeParams params;
};

std::vector<Variant> Variants(RopeMode mode, int n_rot, const float* freq_factors) {
  RopeParams base;
  base.mode = mode;
  base.n_rot = n_rot;
  RopeParams linear = base;
  linear.freq_scale = 0.25f;
  RopeParams yarn = base;
  yarn.freq_base = 1000000.0f;
  yarn.freq_scale = 0.25f;
  yarn.ext_factor = 1.0f;
  yarn.n_ctx_orig = 4096;
  RopeParams factors = base;
  factors.freq_base = 500000.0f;
  factors.freq_factors = freq_factors;
  return {{"plain", base}, {"linear", linear}, {"yarn", yarn}, {"freq_factors", factors}};
}

class RopeTest : public ::testing::TestWithParam<Isa> {};

TEST_P(RopeTest, MatchesScalarOnRaggedShapes) {
  const std::vector<float> ff = RandomVector(256, 1.0f, 8.0f, 1);
  for (RopeMode mode : {RopeMode::kNormal, RopeMode::kNeox}) {
    for (int n_rot : {2, 6, 16, 24, 32, 34, 64, 80, 128}) {
      for (int extra : {0, 3, 16}) {
        const int head_dim = n_rot + extra;
        for (const Variant& v : Variants(mode, n_rot, ff.data())) {
          SCOPED_TRACE(::testing::Message() << v.name << " neox=" << (mode == RopeMode::kNeox)
                                            << " n_rot=" << n_rot << " head_dim=" << head_dim);
          const int n_heads = 3;
          const auto x = RandomVector(n_heads * head_dim, -2, 2, n_rot * 7 + extra);
          const auto want = Apply(v.params, 777, n_heads, head_dim, x, Isa::kScalar);
          const auto got = Apply(v.params, 777, n_heads, head_dim, x, GetParam());
          EXPECT_TRUE(AllNear(got, want, 1e-6f, 1e-6f));
          // In place.
          std::vector<float> table(RopeTableFloats(v.params));
          RopeTableInit(v.params, 777, table.data());
          std::vector<float> inplace = x;
          RopeApply(v.params, table.data(), n_heads, head_dim, inplace.data(), inplace.data(),
                    GetParam());
          EXPECT_TRUE(AllNear(inplace, got, 0, 0));
        }
      }
    }
  }
}

TEST_P(RopeTest, MatchesGgmlSemantics) {
  const std::vector<float> ff = RandomVector(64, 1.0f, 8.0f, 2);
  for (RopeMode mode : {RopeMode::kNormal, RopeMode::kNeox}) {
    for (const Variant& v : Variants(mode, 64, ff.data())) {
      for (int64_t pos : {0, 1, 17, 500, 3000}) {
        SCOPED_TRACE(::testing::Message()
                     << v.name << " neox=" << (mode == RopeMode::kNeox) << " pos=" << pos);
        const int n_heads = 2, head_dim = 80;  // Partial rotation: 64 of 80.
        const auto x = RandomVector(n_heads * head_dim, -1, 1, pos + 3);
        std::vector<float> want(x.size());
        GgmlStyleRope(v.params, pos, n_heads, head_dim, x.data(), want.data());
        const auto got = Apply(v.params, pos, n_heads, head_dim, x, GetParam());
        // ggml iterates theta in float; at pos 3000 that drifts ~1e-3 rad.
        EXPECT_TRUE(AllNear(got, want, 0, 3e-3f));
      }
    }
  }
}

// The reason RoPE exists: q.k after rotation depends only on the distance.
TEST_P(RopeTest, DotProductDependsOnlyOnDistance) {
  for (RopeMode mode : {RopeMode::kNormal, RopeMode::kNeox}) {
    RopeParams p;
    p.mode = mode;
    p.n_rot = 64;
    const auto q = RandomVector(64, -1, 1, 5);
    const auto k = RandomVector(64, -1, 1, 6);
    auto dot_at = [&](int64_t pq, int64_t pk) {
      const auto rq = Apply(p, pq, 1, 64, q, GetParam());
      const auto rk = Apply(p, pk, 1, 64, k, GetParam());
      double d = 0;
      for (int i = 0; i < 64; ++i) d += rq[i] * rk[i];
      return d;
    };
    EXPECT_NEAR(dot_at(10, 3), dot_at(107, 100), 1e-4);
    EXPECT_NEAR(dot_at(5, 5), dot_at(0, 0), 1e-4);
  }
}

TEST_P(RopeTest, PositionZeroIsIdentity) {
  RopeParams p;
  p.n_rot = 32;
  const auto x = RandomVector(4 * 40, -1, 1, 9);
  EXPECT_TRUE(AllNear(Apply(p, 0, 4, 40, x, GetParam()), x, 0, 1e-7f));
}

INSTANTIATE_TEST_SUITE_P(AllIsas, RopeTest, ::testing::ValuesIn(AvailableIsas()), IsaParamName);

TEST(RopeYarnTest, CorrDimsMatchGgmlFormula) {
  // llama.cpp's yarn defaults with a 4k-trained, base-10000, 128-dim model.
  float dims[2];
  RopeYarnCorrDims(128, 4096, 10000.0f, 32.0f, 1.0f, dims);
  EXPECT_EQ(dims[0], 20.0f);  // floor(20.94)
  EXPECT_EQ(dims[1], 46.0f);  // ceil(45.03)
}

}  // namespace
}  // namespace waste::kernels::ops
