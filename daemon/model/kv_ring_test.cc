// The sliding-window layers' KV rings: a sequence far longer than a ring
// (a prompt in steps, then token by token) gives the logits the full cache
// gives, in a fraction of its bytes; a prefix whose window the rings no
// longer hold is not reused.
#include <algorithm>
#include <cmath>
#include <vector>

#include "daemon/kernels/thread_pool.h"
#include "daemon/model/forward.h"
#include "daemon/tools/test_models.h"
#include "gtest/gtest.h"

namespace waste::model {
namespace {

constexpr int64_t kCtx = 1024;
constexpr int64_t kWindow = 8;
constexpr int64_t kRing = kWindow + kMaxStepTokens;

class KvRingTest : public ::testing::TestWithParam<tools::SyntheticArch> {
 protected:
  void SetUp() override {
    tools::MkModelOptions o;
    o.arch = GetParam();
    o.out = ::testing::TempDir() + "/kv_ring_" + tools::SyntheticArchFlagName(o.arch) + ".gguf";
    o.dim = 64;
    o.layers = o.arch == tools::SyntheticArch::kGemma3 ? 6 : 2;
    o.heads = 4;
    o.kv_heads = 2;
    o.ffn = 128;
    o.vocab = 320;
    o.ctx = kCtx;
    o.sliding_window = kWindow;
    o.threads = 2;
    ASSERT_TRUE(tools::testing::WriteModel(o, {}).ok());
    auto loaded = tools::testing::LoadModel(o.out);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    m_ = *std::move(loaded);
  }

  tools::testing::LoadedModel m_;
};

TEST_P(KvRingTest, LongSequenceMatchesTheFullCache) {
  const Model& model = *m_.model;
  const HParams& hp = model.hparams();
  kernels::ThreadPool pool(2);
  Forward forward(&model, m_.store.get(), &pool);
  SequenceState ring(model, kCtx, kernels::ops::KvType::kF16);
  SequenceState full(model, kCtx, kernels::ops::KvType::kF16, /*kv_rings=*/false);
  // Windowed layers hold a ring, the others every position.
  for (int64_t l = 0; l < hp.n_layer; ++l) {
    EXPECT_EQ(ring.kv().rows(l), hp.AttentionWindow(l) > 0 ? kRing : kCtx) << l;
    EXPECT_EQ(full.kv().rows(l), kCtx) << l;
  }
  EXPECT_LT(ring.bytes(), full.bytes());
  EXPECT_EQ(ring.bytes(), KvCache::Bytes(hp, kCtx, kernels::ops::KvType::kF16));

  std::vector<int32_t> prompt(700);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 37 + 11) % 320);
  const int64_t n_vocab = hp.n_vocab;
  std::vector<float> want(n_vocab), got(n_vocab);
  ASSERT_TRUE(forward.Run(&full, prompt, want.data()).ok());
  ASSERT_TRUE(forward.Run(&ring, prompt, got.data()).ok());
  auto expect_near = [&](const char* what) {
    double scale = 0;
    for (float v : want) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    for (int64_t i = 0; i < n_vocab; ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-4 * scale) << what << " logit " << i;
    }
  };
  expect_near("prompt");
  for (int32_t token = 5; token < 105; ++token) {  // Past 1.5 rings.
    ASSERT_TRUE(forward.Run(&full, {&token, 1}, want.data()).ok());
    ASSERT_TRUE(forward.Run(&ring, {&token, 1}, got.data()).ok());
    expect_near("decode");
  }
  // A prefix whose window is still in the rings is kept; an older one is not.
  // (Positions from 800 - kRing = 280 on are still in the rings, whatever
  // was truncated since.)
  ASSERT_EQ(ring.n_past(), 800);
  EXPECT_EQ(ring.Truncate(500), 500);
  EXPECT_EQ(ring.Truncate(290), 290);
  EXPECT_EQ(ring.Truncate(100), 0);
  EXPECT_EQ(full.Truncate(100), 100);
  // Emptied, then refilled: a prefix of the new sequence is kept.
  ASSERT_TRUE(forward.Run(&ring, {prompt.data(), 300}, got.data()).ok());
  EXPECT_EQ(ring.Truncate(150), 150);
}

INSTANTIATE_TEST_SUITE_P(Windowed, KvRingTest,
                         ::testing::Values(tools::SyntheticArch::kGemma2,
                                           tools::SyntheticArch::kGemma3),
                         [](const auto& info) { return tools::SyntheticArchFlagName(info.param); });

}  // namespace
}  // namespace waste::model
