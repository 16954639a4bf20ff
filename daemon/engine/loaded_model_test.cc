// LoadedModel: a generation whose weight read fails ends with a clear error
// and only that request fails; the model keeps serving.
#include "daemon/engine/loaded_model.h"

#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "daemon/engine/generate_for_test.h"
#include "daemon/engine/planning.h"
#include "gtest/gtest.h"
#include "storage/fault_env.h"
#include "tests/testdata.h"

namespace waste::engine {
namespace {

TEST(LoadedModelTest, AReadErrorFailsOnlyTheRequestThatNeededIt) {
  const std::string path = testing::ModelPath("stories260K/stories260K.gguf");
  storage::FaultEnv env(storage::Env::Default(),
                        {.max_attempts = 2, .initial_backoff = absl::Microseconds(10)});
  // Plan at the floor so that most chunks stream.
  auto gguf = storage::GgufFile::Open(&env, path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto probe = model::Model::Create(**gguf);
  ASSERT_TRUE(probe.ok()) << probe.status();
  v1::ModelConfig config;
  config.set_context_length(512);
  config.set_kv_cache_type(v1::KV_CACHE_TYPE_F32);
  config.set_threads(1);
  auto planned = PlanModel(**probe, config, 512);
  ASSERT_TRUE(planned.ok()) << planned.status();
  config.set_ram_budget_bytes(static_cast<int64_t>(planned->plan.sizes.floor_bytes));

  auto loaded = LoadedModel::Load(&env, "stories260K", path, config);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  LoadedModel& model = **loaded;
  const cache::ChunkSpec& victim = model.model().chunks()[model.model().layers()[3].ffn_chunk];
  ASSERT_GT(victim.reads[0].length, 3 * cache::kChunkAlignment);
  env.InjectEio({path, victim.reads[0].file_offset + cache::kChunkAlignment,
                 victim.reads[0].file_offset + victim.reads[0].length - cache::kChunkAlignment},
                storage::kFaultForever);

  GreedyResult failed = GenerateGreedy(model, 8);
  EXPECT_EQ(failed.status.code(), absl::StatusCode::kUnavailable) << failed.status;
  EXPECT_TRUE(absl::StrContains(failed.status.message(), "blk.3.ffn")) << failed.status;
  EXPECT_TRUE(absl::StrContains(failed.status.message(), path)) << failed.status;
  EXPECT_EQ(model.Stats().failed_requests(), 1);

  env.ClearFaults();
  GreedyResult ok = GenerateGreedy(model, 256);
  ASSERT_TRUE(ok.status.ok()) << ok.status;
  EXPECT_EQ(ok.ids, testing::StoriesGoldenIds());
  EXPECT_EQ(model.Stats().requests(), 2);
  EXPECT_GT(model.Stats().totals().bytes_read(), 0);
}

}  // namespace
}  // namespace waste::engine
