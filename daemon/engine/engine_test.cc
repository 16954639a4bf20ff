#include "daemon/engine/engine.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "daemon/engine/generate_for_test.h"
#include "gtest/gtest.h"
#include "tests/testdata.h"

namespace waste::engine {
namespace {

TEST(EngineTest, KeepAliveUnloadsIdleModelsOnly) {
  ModelCatalog catalog({testing::ModelPath("stories260K")});
  v1::DaemonConfig config;
  config.mutable_model_defaults()->set_keep_alive_seconds(30);
  Engine engine(storage::Env::Default(), &catalog, config);
  auto model = engine.Get("stories260K");
  ASSERT_TRUE(model.ok()) << model.status();
  const absl::Time used = (*model)->last_used();
  engine.UnloadIdle(used + absl::Seconds(10));
  EXPECT_EQ(engine.Loaded().size(), 1u);
  engine.UnloadIdle(used + absl::Seconds(31));
  EXPECT_TRUE(engine.Loaded().empty());
  // A request still holding the model keeps it usable after the unload.
  v1::TokenizeRequest request;
  request.set_text("Once");
  EXPECT_TRUE((*model)->Tokenize(request).ok());
}

TEST(EngineTest, WithoutKeepAliveModelsStayLoaded) {
  ModelCatalog catalog({testing::ModelPath("stories260K")});
  Engine engine(storage::Env::Default(), &catalog, v1::DaemonConfig());
  ASSERT_TRUE(engine.Get("").ok());  // The only model in the catalog.
  engine.UnloadIdle(absl::Now() + absl::Hours(24));
  EXPECT_EQ(engine.Loaded().size(), 1u);
}

// A model file truncated, rewritten or replaced while loaded: requests that
// need the lost bytes fail saying so, and the next request loads the file
// that is there now (or says why it cannot).
TEST(EngineTest, AModelFileChangedWhileLoadedIsReloaded) {
  const std::string fixture = testing::ModelPath("stories260K/stories260K.gguf");
  const std::string dir = testing::TempDir();
  const std::string path = dir + "/stories260K.gguf";
  std::filesystem::copy_file(fixture, path);
  const uint64_t size = std::filesystem::file_size(path);
  ModelCatalog catalog({dir});
  v1::DaemonConfig config;
  config.mutable_model_defaults()->set_context_length(512);
  config.mutable_model_defaults()->set_threads(1);
  config.mutable_model_defaults()->set_kv_cache_type(v1::KV_CACHE_TYPE_F32);
  Engine engine(storage::Env::Default(), &catalog, config);
  // At the floor, so that most weights stream from the file.
  v1::PlanRequest plan_request;
  plan_request.set_model("stories260K");
  auto plan = engine.Plan(plan_request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  config.mutable_model_defaults()->set_ram_budget_bytes(plan->floor_bytes());
  engine.Reconfigure(config);

  auto first = engine.Get("stories260K");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE((*first)->FileChanged());
  EXPECT_EQ(engine.TryGetLoaded("stories260K"), *first);

  // Truncated in place: the streamed weights are gone.
  std::filesystem::resize_file(path, size / 4);
  std::string how;
  EXPECT_TRUE((*first)->FileChanged(&how));
  EXPECT_TRUE(absl::StrContains(how, "size changed")) << how;
  GreedyResult lost = GenerateGreedy(**first, 8);
  EXPECT_EQ(lost.status.code(), absl::StatusCode::kDataLoss) << lost.status;
  EXPECT_TRUE(absl::StrContains(lost.status.message(), "changed size since it was loaded"))
      << lost.status;
  EXPECT_EQ(engine.TryGetLoaded("stories260K"), nullptr);
  // The next request loads the file as it is now: a clear refusal.
  auto truncated = engine.Get("stories260K");
  ASSERT_FALSE(truncated.ok());
  EXPECT_TRUE(absl::StrContains(truncated.status().message(), path)) << truncated.status();

  // Replaced (a new file renamed over it): loaded afresh, golden again.
  std::filesystem::copy_file(fixture, path + ".new");
  std::filesystem::rename(path + ".new", path);
  auto second = engine.Get("stories260K");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(*second, *first);
  GreedyResult ok = GenerateGreedy(**second, 256);
  ASSERT_TRUE(ok.status.ok()) << ok.status;
  EXPECT_EQ(ok.ids, testing::StoriesGoldenIds());
  // Unchanged: the same copy.
  auto again = engine.Get("stories260K");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *second);

  // Replaced while loaded, with the old copy still serving a holder: the
  // old one goes on reading its (unlinked) file, the new one is loaded.
  std::filesystem::copy_file(fixture, path + ".new");
  std::filesystem::rename(path + ".new", path);
  auto third = engine.Get("");
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_NE(*third, *second);
  EXPECT_EQ(GenerateGreedy(**second, 256).ids, testing::StoriesGoldenIds());
  EXPECT_EQ(GenerateGreedy(**third, 256).ids, testing::StoriesGoldenIds());
}

// A VRAM budget plans a third tier (the Plan RPC shows it whether or not a
// GPU is there); loading with it uses the GPU when one is usable, else logs
// why and runs on the CPU with the two-tier plan. Either way the greedy
// tokens are the CPU's.
TEST(EngineTest, VramBudgetPlansThreeTiersAndRunsWithOrWithoutAGpu) {
  ModelCatalog catalog({testing::ModelPath("stories260K")});
  v1::DaemonConfig config;
  config.mutable_model_defaults()->set_context_length(256);
  config.mutable_model_defaults()->set_threads(1);
  Engine cpu_engine(storage::Env::Default(), &catalog, config);
  auto cpu = cpu_engine.Get("stories260K");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ((*cpu)->Plan().vram_budget_bytes(), 0);
  const GreedyResult want = GenerateGreedy(**cpu, 12);
  ASSERT_TRUE(want.status.ok()) << want.status;

  config.mutable_model_defaults()->set_vram_budget_bytes(1 << 20);
  Engine engine(storage::Env::Default(), &catalog, config);
  v1::PlanRequest request;
  request.set_model("stories260K");
  auto plan = engine.Plan(request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->vram_budget_bytes(), 1 << 20);
  EXPECT_GT(plan->vram_chunks(), 0);
  EXPECT_GT(plan->vram_weight_bytes(), 0);
  EXPECT_GT(plan->bytes_per_token().vram(), 0);
  EXPECT_TRUE(absl::StrContains(plan->explanation(), "VRAM budget")) << plan->explanation();
  request.set_vram_budget_bytes(0);
  auto two_tiers = engine.Plan(request);
  ASSERT_TRUE(two_tiers.ok()) << two_tiers.status();
  EXPECT_EQ(two_tiers->vram_budget_bytes(), 0);
  EXPECT_EQ(two_tiers->bytes_per_token().vram(), 0);

  auto loaded = engine.Get("stories260K");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const GreedyResult got = GenerateGreedy(**loaded, 12);
  ASSERT_TRUE(got.status.ok()) << got.status;
  EXPECT_EQ(got.ids, want.ids) << "VRAM budget in use: " << (*loaded)->Plan().vram_budget_bytes();
}

}  // namespace
}  // namespace waste::engine
