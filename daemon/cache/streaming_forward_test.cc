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
#include "daemon/memory/model_plan.h"
#include "daemon/memory/plan.h"
#include "daemon/model/forward.h"
#include "daemon/model/model.h"
#include "daemon/tools/mkmodel.h"
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
    memory::PlanInput input = memory::PlanInputFor(*model_, kCtx, kKv);
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

void WriteSynthetic(storage::MemEnv* env, tools::SyntheticArch arch) {
  tools::MkModelOptions o;
  o.arch = arch;
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
  memory::PlanInput input = memory::PlanInputFor(**model, kCtx, kKv);
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

// Two sessions stepped together read each streamed chunk once per step,
// not once per session, and get the same logits as when run alone.
TEST(StreamingStepTest, SessionsInOneStepShareEveryChunkRead) {
  storage::Env* env = storage::Env::Default();
  const std::string path = testing::ModelPath("stories260K/stories260K.gguf");
  auto gguf = storage::GgufFile::Open(env, path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto model = Model::Create(**gguf);
  ASSERT_TRUE(model.ok()) << model.status();
  auto file = env->NewRandomAccessFile(path, {.direct = true});
  ASSERT_TRUE(file.ok()) << file.status();
  memory::PlanInput input = memory::PlanInputFor(**model, kCtx, kKv);
  auto plan = memory::PlanMemory(input, BudgetFor(input, 0));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_GT(plan->read_bytes_per_token, 0u);
  auto store = StreamingChunkStore::Create(env, **file, (*model)->chunks(),
                                           StreamingStoreOptions::FromPlan(*plan));
  ASSERT_TRUE(store.ok()) << store.status();
  kernels::ThreadPool pool(1);
  model::Forward forward(model->get(), store->get(), &pool);
  const int64_t n_vocab = (*model)->hparams().n_vocab;

  // Alone: each session's token costs a full pass of reads.
  SequenceState alone_a(**model, kCtx, kKv), alone_b(**model, kCtx, kKv);
  std::vector<float> want_a(n_vocab), want_b(n_vocab);
  const int32_t a = 1, b = 403;
  uint64_t before = (*store)->Stats().bytes_read;
  ASSERT_TRUE(forward.Run(&alone_a, {&a, 1}, want_a.data()).ok());
  uint64_t one_pass = (*store)->Stats().bytes_read - before;
  ASSERT_TRUE(forward.Run(&alone_b, {&b, 1}, want_b.data()).ok());
  EXPECT_GT(one_pass, 0u);

  // Together: one pass of reads serves both.
  SequenceState together_a(**model, kCtx, kKv), together_b(**model, kCtx, kKv);
  std::vector<float> got_a(n_vocab), got_b(n_vocab);
  model::SequenceStep steps[] = {{&together_a, {&a, 1}, got_a.data()},
                                 {&together_b, {&b, 1}, got_b.data()}};
  before = (*store)->Stats().bytes_read;
  ASSERT_TRUE(forward.Step(steps).ok());
  uint64_t shared_pass = (*store)->Stats().bytes_read - before;
  EXPECT_LE(shared_pass, one_pass + one_pass / 4);
  EXPECT_EQ(got_a, want_a);
  EXPECT_EQ(got_b, want_b);
  EXPECT_EQ(together_a.n_past(), 1);
  EXPECT_EQ(together_b.n_past(), 1);
}

}  // namespace
}  // namespace waste::cache
