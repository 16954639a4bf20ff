#include "daemon/model/model_plan.h"

#include "daemon/memory/plan.h"
#include "daemon/model/model.h"
#include "gtest/gtest.h"
#include "storage/env.h"
#include "storage/gguf.h"
#include "tests/testdata.h"

namespace waste::model {
namespace {

TEST(ModelPlanTest, Stories260K) {
  auto gguf = storage::GgufFile::Open(storage::Env::Default(),
                                      testing::ModelPath("stories260K/stories260K.gguf"));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto model = Model::Create(**gguf);
  ASSERT_TRUE(model.ok()) << model.status();
  memory::PlanInput input = PlanInputFor(**model, 512, kernels::ops::KvType::kF32);
  EXPECT_EQ(input.chunks.size(), 12u);  // Global, embeddings, 5 x (attention, FFN).
  // 5 layers x (K + V) x 512 positions x 4 kv heads x 8 dims x 4 bytes,
  // and the session's logits over 512 tokens.
  EXPECT_EQ(input.kv_bytes, 5u * 2 * 512 * 4 * 8 * 4 + 512 * 4);
  EXPECT_GT(input.scratch_bytes, 0u);
  memory::PlanSizes sizes = memory::ComputePlanSizes(input, {});
  auto plan = memory::PlanMemory(input, sizes.floor_bytes, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->n_layers, 5);
  EXPECT_GT(plan->read_bytes_per_token, 0u);
}

}  // namespace
}  // namespace waste::model
