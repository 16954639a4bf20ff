// The forward pass over the streaming store gives the same greedy tokens and
// bit-identical logits as over the fully resident store, at budgets from
// everything resident down to the plan's floor; a persistent read error
// fails the run with a clear status and the store recovers once it clears.
#include <cstring>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "daemon/cache/resident_store.h"
#include "daemon/cache/streaming_store.h"
#include "daemon/memory/plan.h"
#include "daemon/model/forward.h"
#include "daemon/model/model.h"
#include "daemon/model/model_plan.h"
#include "daemon/tools/synthetic_model.h"
#include "gtest/gtest.h"
#include "storage/env.h"
#include "storage/fault_env.h"
#include "storage/gguf.h"
#include "storage/mem_env.h"
#include "tests/testdata.h"

namespace waste::cache {
namespace {

using model::Forward;
using model::Model;
using model::SequenceState;

constexpr auto kKv = kernels::ops::KvType::kF32;
constexpr int64_t kCtx = 512;

struct Generation {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // Every step's, back to back.
};

// Greedy decoding from BOS (id 1), one token per Run.
absl::StatusOr<Generation> Generate(const Model& model, ChunkStore* store, int steps) {
  kernels::ThreadPool pool(2);
  SequenceState state(model, kCtx, kKv);
  Forward forward(&model, store, &pool);
  const int64_t n_vocab = model.hparams().n_vocab;
  Generation g;
  g.logits.resize(steps * n_vocab);
  int32_t token = 1;
  for (int i = 0; i < steps; ++i) {
    float* logits = &g.logits[i * n_vocab];
    absl::Status status = forward.Run(&state, {&token, 1}, logits);
    if (!status.ok()) return status;
    token = static_cast<int32_t>(std::max_element(logits, logits + n_vocab) - logits);
    g.tokens.push_back(token);
  }
  return g;
}

// A budget giving the weights `share` of their size (never under the floor).
uint64_t BudgetFor(const memory::PlanInput& input, double share) {
  memory::PlanSizes s = memory::ComputePlanSizes(input, {});
  uint64_t fixed = s.kv_bytes + s.scratch_bytes + s.runtime_bytes;
  return std::max<uint64_t>(s.floor_bytes, fixed + static_cast<uint64_t>(share * s.weight_bytes));
}

class StreamedMatchesResident : public ::testing::Test {
 protected:
  void Load(storage::Env* env, const std::string& path, bool direct) {
    env_ = env;
    auto gguf = storage::GgufFile::Open(env, path);
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    gguf_ = *std::move(gguf);
    auto model = Model::Create(*gguf_);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    auto file = env->NewRandomAccessFile(path, {.direct = direct});
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = *std::move(file);
  }

  // Resident baseline, then streamed at each budget: same tokens, same
  // logits to the bit.
  void CompareAtBudgets(int steps, const std::vector<int32_t>* golden) {
    auto resident = ResidentChunkStore::Load(env_, *file_, model_->chunks(), {});
    ASSERT_TRUE(resident.ok()) << resident.status();
    auto want = Generate(*model_, resident->get(), steps);
    ASSERT_TRUE(want.ok()) << want.status();
    if (golden != nullptr) {
      for (int i = 0; i < steps; ++i) ASSERT_EQ(want->tokens[i], (*golden)[i]) << "token " << i;
    }
    memory::PlanInput input = model::PlanInputFor(*model_, kCtx, kKv);
    for (double share : {1.0, 0.5, 0.25, 0.0}) {
      SCOPED_TRACE(share == 0 ? std::string("floor") : std::to_string(share));
      auto plan = memory::PlanMemory(input, BudgetFor(input, share));
      ASSERT_TRUE(plan.ok()) << plan.status();
      if (share == 1.0) {
        EXPECT_TRUE(plan->all_resident());
      } else {
        EXPECT_FALSE(plan->all_resident()) << plan->Explain();
      }
      if (share == 0) {
        EXPECT_EQ(plan->streaming_slots, 2);
      }
      for (PolicyKind policy : {PolicyKind::kLru, PolicyKind::kLfu}) {
        StreamingStoreOptions options = StreamingStoreOptions::FromPlan(*plan);
        options.policy = policy;
        auto store = StreamingChunkStore::Create(env_, *file_, model_->chunks(), options);
        ASSERT_TRUE(store.ok()) << store.status();
        auto got = Generate(*model_, store->get(), steps);
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_EQ(got->tokens, want->tokens);
        EXPECT_EQ(0, std::memcmp(got->logits.data(), want->logits.data(),
                                 want->logits.size() * sizeof(float)))
            << "logits differ from the resident run";
        ChunkStoreStats stats = (*store)->Stats();
        if (share < 1.0) {
          EXPECT_GT(stats.misses + stats.prefetch_hits, 0);
          EXPECT_GT(stats.bytes_read, static_cast<int64_t>(plan->pinned_bytes));
        } else {
          EXPECT_EQ(stats.misses, 0);
        }
      }
    }
  }

  storage::Env* env_ = nullptr;
  std::unique_ptr<storage::GgufFile> gguf_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<storage::RandomAccessFile> file_;
};

TEST_F(StreamedMatchesResident, Stories260KGoldenTokensDirectIo) {
  std::vector<int32_t> golden = testing::StoriesGoldenIds();
  ASSERT_EQ(golden.size(), 256u);
  Load(storage::Env::Default(), testing::ModelPath("stories260K/stories260K.gguf"), true);
  CompareAtBudgets(256, &golden);
}

void WriteSynthetic(storage::MemEnv* env, tools::SyntheticArch arch,
                    storage::GgmlType type = storage::GgmlType::kQ8_0) {
  tools::MkModelOptions o;
  o.arch = arch;
  o.type = type;
  o.out = "/model.gguf";
  o.dim = 256;
  o.layers = 4;
  o.heads = 4;
  o.kv_heads = 2;
  o.ffn = 512;
  o.ctx = 512;
  o.threads = 2;
  auto result = tools::WriteSyntheticModel(o, env);
  ASSERT_TRUE(result.ok()) << result.status();
}

TEST_F(StreamedMatchesResident, SyntheticLlama) {
  storage::MemEnv env;
  WriteSynthetic(&env, tools::SyntheticArch::kLlama);
  Load(&env, "/model.gguf", false);
  CompareAtBudgets(40, nullptr);
}

TEST_F(StreamedMatchesResident, SyntheticQwen3) {
  storage::MemEnv env;
  WriteSynthetic(&env, tools::SyntheticArch::kQwen3);
  Load(&env, "/model.gguf", false);
  CompareAtBudgets(40, nullptr);
}

// The 1-4-bit types and MXFP4: with rows of 256 every matrix keeps the type (no
// fallback), embeddings and head included.
TEST_F(StreamedMatchesResident, SyntheticLowBitTypes) {
  using storage::GgmlType;
  for (GgmlType type : {GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS,
                        GgmlType::kIQ3_S, GgmlType::kIQ3_XXS, GgmlType::kIQ2_S, GgmlType::kIQ2_XS,
                        GgmlType::kIQ2_XXS, GgmlType::kIQ1_M, GgmlType::kIQ1_S, GgmlType::kMXFP4}) {
    SCOPED_TRACE(std::string(storage::GgmlTypeName(type)));
    storage::MemEnv env;
    WriteSynthetic(&env, tools::SyntheticArch::kLlama, type);
    Load(&env, "/model.gguf", false);
    ASSERT_EQ(gguf_->FindTensor("blk.3.ffn_down.weight")->type, type);
    CompareAtBudgets(12, nullptr);
  }
}

TEST(StreamingFaultTest, PersistentEioFailsTheRunThenRecovers) {
  std::vector<int32_t> golden = testing::StoriesGoldenIds();
  storage::FaultEnv env(storage::Env::Default(),
                        {.max_attempts = 2, .initial_backoff = absl::Microseconds(10)});
  const std::string path = testing::ModelPath("stories260K/stories260K.gguf");
  auto gguf = storage::GgufFile::Open(storage::Env::Default(), path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto model = Model::Create(**gguf);
  ASSERT_TRUE(model.ok()) << model.status();
  auto file = env.NewRandomAccessFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  memory::PlanInput input = model::PlanInputFor(**model, kCtx, kKv);
  auto plan = memory::PlanMemory(input, BudgetFor(input, 0));
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto store = StreamingChunkStore::Create(&env, **file, (*model)->chunks(),
                                           StreamingStoreOptions::FromPlan(*plan));
  ASSERT_TRUE(store.ok()) << store.status();

  const ChunkId victim = (*model)->layers()[2].ffn_chunk;
  const ChunkRead& extent = (*model)->chunks()[victim].reads[0];
  ASSERT_FALSE(plan->is_pinned[victim]);
  // Pages at the ends of an extent may be shared with the neighbouring
  // chunk's (extents are page-aligned): fault only the middle.
  ASSERT_GT(extent.length, 3 * kChunkAlignment);
  env.InjectEio({path, extent.file_offset + kChunkAlignment,
                 extent.file_offset + extent.length - kChunkAlignment},
                storage::kFaultForever);
  auto failed = Generate(**model, store->get(), 4);
  ASSERT_FALSE(failed.ok());
  const std::string message(failed.status().message());
  for (const std::string& part : {std::string("blk.2.ffn"), path, std::string("errno 5")}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
  }
  // Still failing while the fault lasts.
  EXPECT_FALSE(Generate(**model, store->get(), 1).ok());

  env.ClearFaults();
  auto recovered = Generate(**model, store->get(), 64);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  for (int i = 0; i < 64; ++i) EXPECT_EQ(recovered->tokens[i], golden[i]) << "token " << i;
}

}  // namespace
}  // namespace waste::cache

namespace waste::cache {
namespace {

// Four sessions at different positions stepped together (one prefill chunk,
// three decode tokens) read each streamed chunk exactly once: the step
// reads the same bytes as one session's step alone, and each session gets
// the same logits as alone.
TEST(StreamingStepTest, SessionsInOneStepShareEveryChunkRead) {
  storage::Env* env = storage::Env::Default();
  const std::string path = testing::ModelPath("stories260K/stories260K.gguf");
  auto gguf = storage::GgufFile::Open(env, path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto model = Model::Create(**gguf);
  ASSERT_TRUE(model.ok()) << model.status();
  auto file = env->NewRandomAccessFile(path, {.direct = true});
  ASSERT_TRUE(file.ok()) << file.status();
  memory::PlanInput input = model::PlanInputFor(**model, kCtx, kKv);
  auto plan = memory::PlanMemory(input, BudgetFor(input, 0));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_GT(plan->read_bytes_per_token, 0u);
  auto store = StreamingChunkStore::Create(env, **file, (*model)->chunks(),
                                           StreamingStoreOptions::FromPlan(*plan));
  ASSERT_TRUE(store.ok()) << store.status();
  kernels::ThreadPool pool(1);
  model::Forward forward(model->get(), store->get(), &pool);
  const int64_t n_vocab = (*model)->hparams().n_vocab;
  // What a step read of its chunks: bytes, misses, prefetched chunks used
  // and wasted (not the embedding rows each token reads on its own).
  auto reads = [&] {
    const ChunkStoreStats stats = (*store)->Stats();
    return std::vector<int64_t>{stats.bytes_read - stats.part_bytes, stats.misses,
                                stats.prefetch_hits, stats.prefetch_wasted};
  };
  auto minus = [](std::vector<int64_t> a, const std::vector<int64_t>& b) {
    for (size_t i = 0; i < a.size(); ++i) a[i] -= b[i];
    return a;
  };

  // Each session's history, then what it runs in the step: sessions 0-2 one
  // decode token, session 3 a prefill chunk of six.
  const std::vector<std::vector<int32_t>> history = {{1}, {1, 403, 407}, {1, 9, 23, 47, 81}, {1}};
  const std::vector<std::vector<int32_t>> next = {{5}, {6}, {7}, {200, 201, 202, 203, 204, 205}};
  constexpr int kSessions = 4;
  std::vector<std::unique_ptr<SequenceState>> alone, together;
  std::vector<float> scratch_logits(n_vocab);
  for (int i = 0; i < kSessions; ++i) {
    for (auto* states : {&alone, &together}) {
      states->push_back(std::make_unique<SequenceState>(**model, kCtx, kKv));
      ASSERT_TRUE(forward.Run(states->back().get(), history[i], scratch_logits.data()).ok());
    }
  }

  // Alone: every session's step costs a full pass of reads, the same one.
  std::vector<std::vector<float>> want(kSessions, std::vector<float>(n_vocab));
  std::vector<int64_t> one_pass;
  for (int i = 0; i < kSessions; ++i) {
    const std::vector<int64_t> before = reads();
    ASSERT_TRUE(forward.Run(alone[i].get(), next[i], want[i].data()).ok());
    if (i == 0) one_pass = minus(reads(), before);
    EXPECT_EQ(minus(reads(), before), one_pass) << "session " << i;
  }
  EXPECT_GT(one_pass[0], 0);
  EXPECT_EQ(one_pass[3], 0) << "a prefetched chunk was evicted unused";

  // Together: one pass of reads serves all four.
  std::vector<std::vector<float>> got(kSessions, std::vector<float>(n_vocab));
  std::vector<model::SequenceStep> steps;
  for (int i = 0; i < kSessions; ++i) steps.push_back({together[i].get(), next[i], got[i].data()});
  const std::vector<int64_t> before = reads();
  ASSERT_TRUE(forward.Step(steps).ok());
  EXPECT_EQ(minus(reads(), before), one_pass);
  EXPECT_EQ(forward.last_step().tokens, 9);
  EXPECT_EQ(forward.last_step().head_matmuls, 1);
  for (int i = 0; i < kSessions; ++i) {
    EXPECT_EQ(0, std::memcmp(got[i].data(), want[i].data(), n_vocab * sizeof(float)))
        << "session " << i;
    EXPECT_EQ(together[i]->n_past(), alone[i]->n_past());
  }
}

}  // namespace
}  // namespace waste::cache
