// Mixture-of-experts models streamed under budgets below their size (the
// trunk pinned, experts through the expert cache; or below the trunk floor
// the trunk streamed too) give the same greedy
// tokens and bit-identical logits as fully resident: synthetic mixtral,
// qwen3moe and deepseek2 (and qwen3moe in each 1-4-bit type), token at a
// time and in a chunked prefill, with router lookahead off and on, at the
// plan's floor and at a mid budget.
#include <cstring>
#include <map>
#include <set>

#include "daemon/cache/forwarding_store.h"
#include "daemon/cache/resident_store.h"
#include "daemon/cache/streaming_store.h"
#include "daemon/memory/plan.h"
#include "daemon/model/forward.h"
#include "daemon/model/model_plan.h"
#include "daemon/tools/test_models.h"
#include "gtest/gtest.h"
#include "storage/env.h"
#include "storage/gguf.h"
#include "storage/split_gguf.h"
#include "storage/split_gguf_testing.h"

namespace waste::cache {
namespace {

using model::Forward;
using model::SequenceState;

constexpr auto kKv = kernels::ops::KvType::kF32;
constexpr int64_t kCtx = 128;

struct Generation {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // The prefill's last, then every decode step's.
  model::MoeStats stats;
};

// A 12-token prompt in one chunked batch, then greedy decode.
absl::StatusOr<Generation> Generate(const model::Model& model, ChunkStore* store, int steps,
                                    bool lookahead) {
  kernels::ThreadPool pool(2);
  SequenceState state(model, kCtx, kKv);
  Forward forward(&model, store, &pool);
  forward.set_router_lookahead(lookahead);
  const int64_t n_vocab = model.hparams().n_vocab;
  Generation g;
  g.logits.resize((steps + 1) * n_vocab);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 12; ++i) prompt.push_back((i * 37 + 11) % n_vocab);
  absl::Status status = forward.Run(&state, prompt, g.logits.data());
  if (!status.ok()) return status;
  for (int i = 0; i < steps; ++i) {
    const float* last = &g.logits[i * n_vocab];
    int32_t token = static_cast<int32_t>(std::max_element(last, last + n_vocab) - last);
    g.tokens.push_back(token);
    status = forward.Run(&state, {&token, 1}, &g.logits[(i + 1) * n_vocab]);
    if (!status.ok()) return status;
  }
  g.stats = forward.moe_stats();
  return g;
}

class StreamedMoeMatchesResident : public ::testing::TestWithParam<tools::SyntheticArch> {};

// Writes `o` and checks that streaming it matches the resident run. With
// `trunk_streamed`, the floor must stream the trunk too, with pool memory
// (pinned + slots) at most half the trunk.
void ExpectStreamedMatchesResident(const tools::MkModelOptions& o, bool trunk_streamed = false) {
  ASSERT_TRUE(tools::testing::WriteModel(o, {}).ok());
  auto loaded = tools::testing::LoadModel(o.out);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const model::Model& model = *loaded->model;
  constexpr int kSteps = 10;
  auto want = Generate(model, loaded->store.get(), kSteps, false);
  ASSERT_TRUE(want.ok()) << want.status();

  memory::PlanInput input = model::PlanInputFor(model, kCtx, kKv);
  memory::PlanSizes sizes = memory::ComputePlanSizes(input, {});
  ASSERT_TRUE(sizes.moe);
  const uint64_t quarter = sizes.floor_bytes + sizes.expert_bytes / 4;
  for (uint64_t budget : {sizes.floor_bytes, quarter}) {
    auto plan = memory::PlanMemory(input, budget);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_FALSE(plan->all_resident());
    ASSERT_LT(budget, sizes.all_resident_bytes);
    if (trunk_streamed && budget == sizes.floor_bytes) {
      ASSERT_TRUE(plan->trunk_streamed) << plan->Explain();
      EXPECT_LE(2 * plan->pool_bytes(), sizes.trunk_bytes) << plan->Explain();
      EXPECT_GT(plan->streamed_trunk_chunks, 0);
      // Attention is larger than an expert here: it has slots of its own
      // size, and every other slot stays expert-sized.
      EXPECT_GT(plan->large_slots, 0) << plan->Explain();
      EXPECT_EQ(plan->slot_bytes, sizes.expert_slot_bytes);
    }
    for (bool lookahead : {false, true}) {
      SCOPED_TRACE(plan->Explain() + (lookahead ? "lookahead on" : "lookahead off"));
      StreamingStoreOptions options = StreamingStoreOptions::FromPlan(*plan);
      EXPECT_EQ(options.policy, kDefaultExpertPolicy);
      auto store = StreamingChunkStore::Create(storage::Env::Default(), *loaded->file,
                                               model.chunks(), options);
      ASSERT_TRUE(store.ok()) << store.status();
      auto got = Generate(model, store->get(), kSteps, lookahead);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->tokens, want->tokens);
      ASSERT_EQ(got->logits.size(), want->logits.size());
      EXPECT_EQ(0, std::memcmp(got->logits.data(), want->logits.data(),
                               want->logits.size() * sizeof(float)))
          << "logits differ from the resident run";
      // Only routed experts were read, and some had to be.
      const ChunkStoreStats stats = (*store)->Stats();
      EXPECT_GT(stats.misses + stats.prefetch_hits, 0);
      EXPECT_EQ(got->stats.expert_acquires, want->stats.expert_acquires);
      if (lookahead) {
        // Every MoE layer of every decode step was guessed: the first from
        // the embeddings or before the dense FFN ahead of it, the rest
        // from the MoE layer before them.
        int64_t moe_layers = 0;
        for (int64_t l = 0; l < model.hparams().n_layer; ++l) {
          moe_layers += model.hparams().IsMoeLayer(l) ? 1 : 0;
        }
        EXPECT_EQ(got->stats.lookahead_layers, kSteps * moe_layers);
      }
    }
  }
}

tools::MkModelOptions MoeOptions(tools::SyntheticArch arch) {
  tools::MkModelOptions o;
  o.arch = arch;
  o.out =
      ::testing::TempDir() + "/streaming_moe_" + std::to_string(static_cast<int>(o.arch)) + ".gguf";
  o.dim = 128;
  o.layers = 3;
  o.heads = 4;
  o.experts = 16;
  o.experts_used = 4;
  o.expert_ffn = 64;
  o.vocab = 320;
  o.type = storage::GgmlType::kQ8_0;
  if (o.arch == tools::SyntheticArch::kDeepseek2) {
    o.head_dim = 32;
    o.rope_dim = 16;
    o.kv_lora_rank = 64;
  }
  if (o.arch == tools::SyntheticArch::kGptOss) {
    o.type = storage::GgmlType::kMXFP4;  // As gpt-oss's own files.
    o.sliding_window = 4;                // Eight steps go past it.
  }
  return o;
}

TEST_P(StreamedMoeMatchesResident, TokensAndLogitsBitIdentical) {
  ExpectStreamedMatchesResident(MoeOptions(GetParam()));
}

// The 1-4-bit types and MXFP4 in experts: rows of 256 (dim and expert_ffn) keep them.
TEST(StreamedMoeLowBitTest, TokensAndLogitsBitIdentical) {
  using storage::GgmlType;
  for (GgmlType type : {GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS,
                        GgmlType::kIQ3_S, GgmlType::kIQ3_XXS, GgmlType::kIQ2_S, GgmlType::kIQ2_XS,
                        GgmlType::kIQ2_XXS, GgmlType::kIQ1_M, GgmlType::kIQ1_S, GgmlType::kMXFP4}) {
    SCOPED_TRACE(std::string(storage::GgmlTypeName(type)));
    tools::MkModelOptions o = MoeOptions(tools::SyntheticArch::kQwen3Moe);
    o.out = ::testing::TempDir() + "/streaming_moe_" + std::string(storage::GgmlTypeName(type)) +
            ".gguf";
    o.dim = 256;
    o.expert_ffn = 256;
    o.type = type;
    ExpectStreamedMatchesResident(o);
    auto gguf = storage::GgufFile::Open(storage::Env::Default(), o.out);
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    EXPECT_EQ((*gguf)->FindTensor("blk.2.ffn_down_exps.weight")->type, type);
  }
}

// A trunk (attention, routers, shared experts) much larger than the
// experts, as in DeepSeek-V3: at the floor the trunk streams as well, with
// half the trunk's bytes of memory for weights, and the tokens and logits
// stay those of the resident run.
TEST_P(StreamedMoeMatchesResident, TrunkStreamedBelowTheTrunkFloor) {
  tools::MkModelOptions o = MoeOptions(GetParam());
  o.out = ::testing::TempDir() + "/streaming_trunk_" + std::to_string(static_cast<int>(o.arch)) +
          ".gguf";
  o.layers = 16;
  o.experts = 8;
  o.experts_used = 2;
  o.expert_ffn = 32;
  ExpectStreamedMatchesResident(o, /*trunk_streamed=*/true);
}

// A DeepSeek file converted before llama.cpp's MLA split (one attn_kv_b per
// layer, whose key rows each step's first pass derives W_k_b from): the
// experts streamed, then the trunk too.
TEST(StreamedFusedMlaTest, TokensAndLogitsBitIdentical) {
  tools::MkModelOptions o = MoeOptions(tools::SyntheticArch::kDeepseek2);
  o.mla_fused = true;
  o.out = ::testing::TempDir() + "/streaming_fused_mla.gguf";
  ExpectStreamedMatchesResident(o);
  o.out = ::testing::TempDir() + "/streaming_fused_mla_trunk.gguf";
  o.layers = 16;
  o.experts = 8;
  o.experts_used = 2;
  o.expert_ffn = 32;
  ExpectStreamedMatchesResident(o, /*trunk_streamed=*/true);
  auto gguf = storage::GgufFile::Open(storage::Env::Default(), o.out);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  EXPECT_NE((*gguf)->FindTensor("blk.3.attn_kv_b.weight"), nullptr);
  EXPECT_EQ((*gguf)->FindTensor("blk.3.attn_k_b.weight"), nullptr);
}

// A model split by gguf-split, opened by its first part as llama.cpp users
// do: resident, and streamed through O_DIRECT reads of the joined parts at
// the plan's floor, its tokens and logits are those of the whole file.
TEST(SplitModelTest, PartsGiveTheWholeFilesTokensAndLogits) {
  tools::MkModelOptions o = MoeOptions(tools::SyntheticArch::kQwen3Moe);
  o.out = ::testing::TempDir() + "/split_moe.gguf";
  ASSERT_TRUE(tools::testing::WriteModel(o, {}).ok());
  auto whole = tools::testing::LoadModel(o.out);
  ASSERT_TRUE(whole.ok()) << whole.status();
  auto want = Generate(*whole->model, whole->store.get(), 8, false);
  ASSERT_TRUE(want.ok()) << want.status();

  storage::Env* env = storage::Env::Default();
  auto parts = storage::testing::WriteSplitParts(env, o.out, 3);
  ASSERT_TRUE(parts.ok()) << parts.status();
  auto split = tools::testing::LoadModel((*parts)[0]);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->gguf->split_count(), 3);
  const model::Model& model = *split->model;
  auto resident = Generate(model, split->store.get(), 8, false);
  ASSERT_TRUE(resident.ok()) << resident.status();
  EXPECT_EQ(resident->tokens, want->tokens);
  EXPECT_EQ(resident->logits, want->logits);

  memory::PlanInput input = model::PlanInputFor(model, kCtx, kKv);
  auto plan = memory::PlanMemory(input, memory::ComputePlanSizes(input, {}).floor_bytes);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_FALSE(plan->all_resident());
  auto file = storage::OpenModelFile(env, *split->gguf, {.direct = true});
  ASSERT_TRUE(file.ok()) << file.status();
  auto store = StreamingChunkStore::Create(env, **file, model.chunks(),
                                           StreamingStoreOptions::FromPlan(*plan));
  ASSERT_TRUE(store.ok()) << store.status();
  auto streamed = Generate(model, store->get(), 8, true);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_EQ(streamed->tokens, want->tokens);
  EXPECT_EQ(streamed->logits, want->logits);
  EXPECT_GT((*store)->Stats().misses, 0);
}

INSTANTIATE_TEST_SUITE_P(Archs, StreamedMoeMatchesResident,
                         ::testing::Values(tools::SyntheticArch::kMixtral,
                                           tools::SyntheticArch::kQwen3Moe,
                                           tools::SyntheticArch::kDeepseek2,
                                           tools::SyntheticArch::kGptOss,
                                           tools::SyntheticArch::kGlm4Moe));

// Forwards to a store and counts each chunk's Acquires.
class CountingStore final : public ForwardingChunkStore {
 public:
  using ForwardingChunkStore::ForwardingChunkStore;
  absl::StatusOr<const uint8_t*> Acquire(ChunkId id) override {
    ++acquires_[id];
    return ForwardingChunkStore::Acquire(id);
  }
  std::map<ChunkId, int>& acquires() { return acquires_; }

 private:
  std::map<ChunkId, int> acquires_;
};

// Four sessions' decode tokens stepped together (streamed, at the floor)
// acquire each distinct routed expert of each layer once: exactly the union
// of what the sessions acquire alone. Each gets the same logits as alone.
TEST(StreamedMoeStepTest, DecodeStepOfFourAcquiresTheUnionOfTheirExpertsOnce) {
  tools::MkModelOptions o;
  o.arch = tools::SyntheticArch::kQwen3Moe;
  o.out = ::testing::TempDir() + "/streaming_moe_step.gguf";
  o.dim = 128;
  o.layers = 3;
  o.heads = 4;
  o.experts = 16;
  o.experts_used = 4;
  o.expert_ffn = 64;
  o.vocab = 320;
  o.type = storage::GgmlType::kQ8_0;
  ASSERT_TRUE(tools::testing::WriteModel(o, {}).ok());
  auto loaded = tools::testing::LoadModel(o.out);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const model::Model& model = *loaded->model;
  const int64_t n_vocab = model.hparams().n_vocab;
  memory::PlanInput input = model::PlanInputFor(model, kCtx, kKv);
  auto plan = memory::PlanMemory(input, memory::ComputePlanSizes(input, {}).floor_bytes);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto streaming =
      StreamingChunkStore::Create(storage::Env::Default(), *loaded->file, model.chunks(),
                                  StreamingStoreOptions::FromPlan(*plan));
  ASSERT_TRUE(streaming.ok()) << streaming.status();
  CountingStore store(streaming->get());
  kernels::ThreadPool pool(2);
  Forward forward(&model, &store, &pool);
  auto expert_acquires = [&] {
    std::map<ChunkId, int> experts;
    for (const auto& [id, count] : store.acquires()) {
      if (model.chunks()[id].kind == ChunkKind::kExpert) experts[id] = count;
    }
    return experts;
  };

  // Sessions with different histories, each twice: alone and together.
  constexpr int kSessions = 4;
  std::vector<std::unique_ptr<SequenceState>> alone, together;
  std::vector<float> logits(n_vocab);
  for (int i = 0; i < kSessions; ++i) {
    std::vector<int32_t> history;
    for (int t = 0; t < 3 + 2 * i; ++t) history.push_back((t * 53 + 17 * i + 3) % n_vocab);
    for (auto* states : {&alone, &together}) {
      states->push_back(std::make_unique<SequenceState>(model, kCtx, kKv));
      ASSERT_TRUE(forward.Run(states->back().get(), history, logits.data()).ok());
    }
  }
  const std::vector<int32_t> next = {11, 42, 42, 300};

  std::set<ChunkId> union_of_alone;
  int64_t acquired_alone = 0;
  std::vector<std::vector<float>> want(kSessions, std::vector<float>(n_vocab));
  for (int i = 0; i < kSessions; ++i) {
    store.acquires().clear();
    ASSERT_TRUE(forward.Run(alone[i].get(), {&next[i], 1}, want[i].data()).ok());
    for (const auto& [id, count] : expert_acquires()) {
      EXPECT_EQ(count, 1) << model.chunks()[id].name;
      union_of_alone.insert(id);
      ++acquired_alone;
    }
  }

  std::vector<std::vector<float>> got(kSessions, std::vector<float>(n_vocab));
  std::vector<model::SequenceStep> steps;
  for (int i = 0; i < kSessions; ++i) {
    steps.push_back({together[i].get(), {&next[i], 1}, got[i].data()});
  }
  store.acquires().clear();
  ASSERT_TRUE(forward.Step(steps).ok());
  std::set<ChunkId> acquired_together;
  for (const auto& [id, count] : expert_acquires()) {
    EXPECT_EQ(count, 1) << model.chunks()[id].name;
    acquired_together.insert(id);
  }
  EXPECT_EQ(acquired_together, union_of_alone);
  EXPECT_EQ(forward.last_step().expert_acquires, static_cast<int64_t>(union_of_alone.size()));
  EXPECT_EQ(forward.last_step().routed, kSessions * 3 * o.experts_used);
  // Sessions 1 and 2 feed the same token, and routes overlap anyway.
  EXPECT_LT(static_cast<int64_t>(union_of_alone.size()), acquired_alone);
  for (int i = 0; i < kSessions; ++i) {
    EXPECT_EQ(0, std::memcmp(got[i].data(), want[i].data(), n_vocab * sizeof(float)))
        << "session " << i;
  }
}

}  // namespace
}  // namespace waste::cache
