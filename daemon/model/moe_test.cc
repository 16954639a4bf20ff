// Expert chunks and the MoE forward pass over a store that records what it
// is asked: each routed expert is its own chunk, only routed experts are
// acquired (each once per batch), they are prefetched before the first is
// computed, and a chunked prefill gives the same logits as token-at-a-time.
#include "daemon/model/moe.h"

#include <set>

#include "daemon/cache/forwarding_store.h"
#include "daemon/model/forward.h"
#include "daemon/quality/quantize_model.h"
#include "daemon/tools/test_models.h"
#include "gtest/gtest.h"

namespace waste::model {
namespace {

// Forwards to a store and logs every Acquire and Prefetch.
class RecordingStore final : public cache::ForwardingChunkStore {
 public:
  struct Event {
    bool prefetch;
    std::vector<memory::ChunkId> ids;
    size_t needed_now = 0;  // Of a Prefetch.
  };
  using ForwardingChunkStore::ForwardingChunkStore;
  absl::StatusOr<const uint8_t*> Acquire(memory::ChunkId id) override {
    events_.push_back({false, {id}, 0});
    return ForwardingChunkStore::Acquire(id);
  }
  // Recorded only: the test decides what the store reads.
  using ForwardingChunkStore::Prefetch;
  void Prefetch(std::span<const memory::ChunkId> upcoming, size_t needed_now) override {
    events_.push_back({true, {upcoming.begin(), upcoming.end()}, needed_now});
  }
  std::vector<Event>& events() { return events_; }

 private:
  std::vector<Event> events_;
};

tools::MkModelOptions SmallDeepseek(const std::string& name) {
  tools::MkModelOptions o;
  o.arch = tools::SyntheticArch::kDeepseek2;
  o.out = ::testing::TempDir() + "/" + name;
  o.dim = 128;
  o.layers = 3;
  o.heads = 4;
  o.head_dim = 32;
  o.rope_dim = 16;
  o.kv_lora_rank = 64;
  o.experts = 16;
  o.experts_used = 4;
  o.expert_ffn = 64;
  o.vocab = 320;
  o.type = storage::GgmlType::kQ8_0;
  return o;
}

// A 32-token prompt through `model` in one chunk (whose experts run one
// after another in id order) and token at a time (decode: the experts in
// memory run together); the logits of every token are the same to the bit.
void ExpectChunkedPrefillEqualsTokenAtATime(const Model& model, cache::ChunkStore* store,
                                            kernels::ThreadPool* pool) {
  const HParams& hp = model.hparams();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 32; ++i) prompt.push_back((i * 37 + 11) % 320);
  Forward chunked(&model, store, pool);
  SequenceState a(model, 64, kernels::ops::KvType::kF16);
  std::vector<float> batch_logits(prompt.size() * hp.n_vocab);
  ASSERT_TRUE(chunked.Run(&a, prompt, batch_logits.data(), /*all_logits=*/true).ok());
  Forward single(&model, store, pool);
  SequenceState b(model, 64, kernels::ops::KvType::kF16);
  std::vector<float> logits(hp.n_vocab);
  for (size_t t = 0; t < prompt.size(); ++t) {
    ASSERT_TRUE(single.Run(&b, {&prompt[t], 1}, logits.data()).ok());
    for (int64_t i = 0; i < hp.n_vocab; ++i) {
      ASSERT_EQ(logits[i], batch_logits[t * hp.n_vocab + i]) << "token " << t << " logit " << i;
    }
  }
  EXPECT_EQ(chunked.moe_stats().routed, single.moe_stats().routed);
  EXPECT_LT(chunked.moe_stats().expert_bytes, single.moe_stats().expert_bytes);
}

class MoeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const tools::MkModelOptions o = SmallDeepseek("moe_test.gguf");
    ASSERT_TRUE(tools::testing::WriteModel(o, {}).ok());
    auto loaded = tools::testing::LoadModel(o.out);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    m_ = *std::move(loaded);
  }
  const Model& model() const { return *m_.model; }

  tools::testing::LoadedModel m_;
  kernels::ThreadPool pool_{2};
};

TEST_F(MoeTest, EachRoutedExpertIsItsOwnChunkOfThreeSlices) {
  const HParams& hp = model().hparams();
  int experts = 0;
  for (const memory::ChunkSpec& c : model().chunks()) {
    if (c.kind != memory::ChunkKind::kExpert) continue;
    ++experts;
    EXPECT_EQ(c.reads.size(), 3u) << c.name;
    EXPECT_GE(c.layer, hp.moe.n_layer_dense_lead);
  }
  EXPECT_EQ(experts, (hp.n_layer - hp.moe.n_layer_dense_lead) * hp.moe.n_expert);
  EXPECT_TRUE(model().layers()[0].experts.empty());  // The leading dense layer.
  const LayerTensors& moe = model().layers()[1];
  ASSERT_EQ(static_cast<int64_t>(moe.experts.size()), hp.moe.n_expert);
  const uint64_t slice = (2 * moe.gate_exps.rows * moe.gate_exps.row_bytes +
                          moe.down_exps.rows * moe.down_exps.row_bytes);
  EXPECT_EQ(model().chunks()[moe.experts[5].chunk].tensor_bytes, slice);
}

TEST_F(MoeTest, DecodeAcquiresOnlyRoutedExpertsAfterPrefetchingThem) {
  const HParams& hp = model().hparams();
  RecordingStore store(m_.store.get());
  Forward forward(&model(), &store, &pool_);
  SequenceState state(model(), 64, kernels::ops::KvType::kF16);
  std::vector<float> logits(hp.n_vocab);
  std::set<memory::ChunkId> expert_chunks;
  for (const memory::ChunkSpec& c : model().chunks()) {
    if (c.kind == memory::ChunkKind::kExpert) expert_chunks.insert(c.id);
  }
  for (int32_t token : {3, 99, 250}) {
    store.events().clear();
    ASSERT_TRUE(forward.Run(&state, {&token, 1}, logits.data()).ok());
    std::set<memory::ChunkId> prefetched;
    int acquired = 0;
    for (const auto& e : store.events()) {
      if (e.prefetch) {
        prefetched.insert(e.ids.begin(), e.ids.end());
      } else if (expert_chunks.count(e.ids[0]) > 0) {
        EXPECT_TRUE(prefetched.count(e.ids[0])) << "expert chunk " << e.ids[0] << " not prefetched";
        ++acquired;
      }
    }
    EXPECT_EQ(acquired, (hp.n_layer - hp.moe.n_layer_dense_lead) * hp.moe.n_expert_used);
  }
  EXPECT_EQ(forward.moe_stats().expert_acquires, 3 * 2 * hp.moe.n_expert_used);
}

TEST_F(MoeTest, ChunkedPrefillEqualsTokenAtATimeAndReadsEachExpertOncePerBatch) {
  const HParams& hp = model().hparams();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 32; ++i) prompt.push_back((i * 37 + 11) % 320);

  RecordingStore store(m_.store.get());
  Forward chunked(&model(), &store, &pool_);
  SequenceState a(model(), 64, kernels::ops::KvType::kF16);
  std::vector<float> batch_logits(prompt.size() * hp.n_vocab);
  ASSERT_TRUE(chunked.Run(&a, prompt, batch_logits.data(), /*all_logits=*/true).ok());
  std::multiset<memory::ChunkId> acquires;
  for (const auto& e : store.events()) {
    if (!e.prefetch && model().chunks()[e.ids[0]].kind == memory::ChunkKind::kExpert) {
      acquires.insert(e.ids[0]);
    }
  }
  for (memory::ChunkId id : acquires) EXPECT_EQ(acquires.count(id), 1u);
  ExpectChunkedPrefillEqualsTokenAtATime(model(), m_.store.get(), &pool_);
}

// Counts the products it sees (a Forward with an observer runs its experts
// one by one).
class CountingObserver final : public ProductObserver {
 public:
  void OnProduct(memory::ChunkId, uint64_t, const kernels::WeightView&, const float*, int64_t,
                 int64_t) override {
    ++products;
  }
  int64_t products = 0;
};

// Decode runs the experts in memory together (one loop for all their gates
// and ups, one for their downs); its logits are those of each expert run on
// its own (as a Forward with an observer does), to the bit.
TEST_F(MoeTest, ExpertsRunTogetherAsEachAlone) {
  const HParams& hp = model().hparams();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back((i * 53 + 7) % 320);
  std::vector<float> together((prompt.size() + 3) * hp.n_vocab), alone(together.size());
  CountingObserver observer;
  for (std::vector<float>* logits : {&together, &alone}) {
    Forward forward(&model(), m_.store.get(), &pool_);
    if (logits == &alone) forward.set_product_observer(&observer);
    SequenceState state(model(), 64, kernels::ops::KvType::kF16);
    ASSERT_TRUE(forward.Run(&state, prompt, logits->data(), /*all_logits=*/true).ok());
    for (int32_t t = 0; t < 3; ++t) {
      ASSERT_TRUE(
          forward.Run(&state, {&t, 1}, logits->data() + (prompt.size() + t) * hp.n_vocab).ok());
    }
  }
  EXPECT_GT(observer.products, 0);
  for (size_t i = 0; i < together.size(); ++i) {
    ASSERT_EQ(together[i], alone[i]) << "token " << i / hp.n_vocab << " logit " << i % hp.n_vocab;
  }
}

// Real files mix types per tensor (e.g. Q4_K gate and up, Q6_K down); with
// gate, up and down each of its own type, decode still gives prefill's
// logits (its experts' gate and up then run as one loop per type).
TEST(MoeMixedTypesTest, ChunkedPrefillEqualsTokenAtATime) {
  tools::MkModelOptions o = SmallDeepseek("moe_mixed_f32.gguf");
  o.type = storage::GgmlType::kF32;
  ASSERT_TRUE(tools::testing::WriteModel(o, {}).ok());
  const std::string mixed = ::testing::TempDir() + "/moe_mixed.gguf";
  quality::QuantizeOptions q;
  q.type = storage::GgmlType::kQ8_0;
  q.tensor_types = {{"blk.*.ffn_gate_exps.weight", storage::GgmlType::kQ4_0},
                    {"blk.*.ffn_down_exps.weight", storage::GgmlType::kQ5_0}};
  ASSERT_TRUE(quality::QuantizeModel(storage::Env::Default(), o.out, mixed, q).ok());
  auto loaded = tools::testing::LoadModel(mixed);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const storage::GgufFile& gguf = *loaded->gguf;
  EXPECT_EQ(gguf.FindTensor("blk.1.ffn_gate_exps.weight")->type, storage::GgmlType::kQ4_0);
  EXPECT_EQ(gguf.FindTensor("blk.1.ffn_up_exps.weight")->type, storage::GgmlType::kQ8_0);
  EXPECT_EQ(gguf.FindTensor("blk.1.ffn_down_exps.weight")->type, storage::GgmlType::kQ5_0);
  kernels::ThreadPool pool(2);
  ExpectChunkedPrefillEqualsTokenAtATime(*loaded->model, loaded->store.get(), &pool);
}

TEST_F(MoeTest, RouterLookaheadPrefetchesItsGuessAndCountsHits) {
  const HParams& hp = model().hparams();
  const int64_t k = hp.moe.n_expert_used;
  RecordingStore store(m_.store.get());
  Forward ahead(&model(), &store, &pool_);
  ahead.set_router_lookahead(true);
  Forward plain(&model(), m_.store.get(), &pool_);
  SequenceState a(model(), 64, kernels::ops::KvType::kF16);
  SequenceState b(model(), 64, kernels::ops::KvType::kF16);
  std::vector<float> la(hp.n_vocab), lb(hp.n_vocab);
  auto experts_of = [&](int l) {
    std::vector<memory::ChunkId> ids;
    for (const ExpertRef& e : model().layers()[l].experts) ids.push_back(e.chunk);
    return ids;
  };
  const std::vector<memory::ChunkId> layer1_experts = experts_of(1), layer2_experts = experts_of(2);
  constexpr int kTokens = 12;
  int32_t token = 7;
  for (int t = 0; t < kTokens; ++t) {
    store.events().clear();
    ASSERT_TRUE(ahead.Run(&a, {&token, 1}, la.data()).ok());
    ASSERT_TRUE(plain.Run(&b, {&token, 1}, lb.data()).ok());
    // The guess only prefetches: logits are bit-identical.
    ASSERT_EQ(la, lb) << "token " << t;
    // Layer 1 follows a dense layer: before that layer's FFN, a Prefetch
    // names just the likelier half of layer 1's predicted top-k, none of
    // them needed yet, and it comes before any acquire of layer 1's experts.
    const int64_t g = (k + 1) / 2;
    bool saw_first_guess = false;
    for (const auto& e : store.events()) {
      if (!e.prefetch) {
        if (std::count(layer1_experts.begin(), layer1_experts.end(), e.ids[0]) > 0) break;
        continue;
      }
      int guessed = 0;
      for (memory::ChunkId id : e.ids) {
        guessed += std::count(layer1_experts.begin(), layer1_experts.end(), id);
      }
      saw_first_guess =
          saw_first_guess ||
          (guessed == g && e.ids.size() == static_cast<size_t>(g) && e.needed_now == 0);
    }
    EXPECT_TRUE(saw_first_guess) << "token " << t;
    // Layer 1's Prefetch names its k experts (needed now), then the
    // likelier half of layer 2's predicted top-k (the guess, read behind
    // them) before layer 2's own routing is known, then layer 2's attention.
    bool saw_guess = false;
    for (const auto& e : store.events()) {
      if (!e.prefetch || e.ids.size() < static_cast<size_t>(k + g + 1)) continue;
      int guessed = 0;
      for (int64_t j = k; j < k + g; ++j) {
        guessed += std::count(layer2_experts.begin(), layer2_experts.end(), e.ids[j]);
      }
      saw_guess = saw_guess || (guessed == g && e.ids[k + g] == model().layers()[2].attn_chunk &&
                                e.needed_now == static_cast<size_t>(k));
    }
    EXPECT_TRUE(saw_guess) << "token " << t;
    token = static_cast<int32_t>(std::max_element(la.begin(), la.end()) - la.begin());
  }
  // Layers 1 and 2 are MoE: two guesses per token.
  const MoeStats& st = ahead.moe_stats();
  EXPECT_EQ(st.lookahead_layers, 2 * kTokens);
  EXPECT_EQ(st.lookahead_routed, 2 * kTokens * k);
  EXPECT_LE(st.lookahead_hits, st.lookahead_routed);
  // Better than a blind guess of k of n_expert: the residual stream carries
  // most of the next router's input.
  EXPECT_GT(st.lookahead_accuracy(), double(k) / hp.moe.n_expert) << st.lookahead_hits;
  EXPECT_EQ(plain.moe_stats().lookahead_layers, 0);
}

TEST(RouteTokenTest, SigmoidBiasChoosesButDoesNotWeigh) {
  MoeParams moe;
  moe.n_expert = 4;
  moe.n_expert_used = 2;
  moe.gating = ExpertGating::kSigmoid;
  moe.norm_weights = true;
  moe.weights_scale = 2;
  float logits[4] = {0, 1, 2, -1};
  const float bias[4] = {0, 0, -5, 5};  // Moves expert 3 in, expert 2 out.
  float select[4];
  int32_t ids[2];
  float w[2];
  RouteToken(moe, logits, bias, select, ids, w);
  EXPECT_EQ(ids[0], 3);
  EXPECT_EQ(ids[1], 1);
  const double p3 = 1 / (1 + std::exp(1.0)), p1 = 1 / (1 + std::exp(-1.0));
  EXPECT_NEAR(w[0], 2 * p3 / (p3 + p1), 1e-6);
  EXPECT_NEAR(w[1], 2 * p1 / (p3 + p1), 1e-6);
}

TEST(RouteTokenTest, GroupLimitedRoutingSkipsWeakGroups) {
  MoeParams moe;
  moe.n_expert = 6;
  moe.n_expert_used = 2;
  moe.n_group = 3;
  moe.n_group_used = 1;
  // Group 0 has the single best expert but group 1 the best top-2 sum.
  float logits[6] = {5, -5, 4.8f, 4.8f, 0, 0};
  float select[6];
  int32_t ids[2];
  float w[2];
  RouteToken(moe, logits, nullptr, select, ids, w);
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 3);
}

}  // namespace
}  // namespace waste::model
