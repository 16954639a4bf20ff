// The VRAM tier of the memory plan: what it holds, in which order, and
// what each tier serves per token. The two-tier tests are plan_test.cc.
#include <algorithm>

#include "daemon/memory/plan.h"
#include "daemon/memory/vram_placement.h"
#include "gtest/gtest.h"

namespace waste::memory {
namespace {

constexpr uint64_t kMiB = 1 << 20;

ChunkSpec Chunk(std::vector<ChunkSpec>* chunks, std::string name, int layer, ChunkKind kind,
                uint64_t bytes, uint64_t* offset) {
  ChunkSpec c;
  c.id = static_cast<ChunkId>(chunks->size());
  c.name = std::move(name);
  c.layer = layer;
  c.kind = kind;
  c.reads.push_back({*offset, bytes, 0});
  c.slot_bytes = c.tensor_bytes = bytes;
  *offset += bytes;
  chunks->push_back(c);
  return c;
}

// Global 100 MiB, 8 layers of attention 40 and FFN 80 (ids 1, 2 for layer
// 0; 15, 16 for layer 7).
std::vector<ChunkSpec> Dense() {
  std::vector<ChunkSpec> chunks;
  uint64_t offset = 0;
  Chunk(&chunks, "global", -1, ChunkKind::kGlobal, 100 * kMiB, &offset);
  for (int l = 0; l < 8; ++l) {
    Chunk(&chunks, "blk." + std::to_string(l) + ".attn", l, ChunkKind::kAttention, 40 * kMiB,
          &offset);
    Chunk(&chunks, "blk." + std::to_string(l) + ".ffn", l, ChunkKind::kFfn, 80 * kMiB, &offset);
  }
  return chunks;
}

// As plan_test's MoE model: global 100; per layer attention 20 and trunk
// 10 (layer 0: dense FFN 30); layers 1..4 with 16 experts of 4 MiB; top-2.
std::vector<ChunkSpec> Moe() {
  std::vector<ChunkSpec> chunks;
  uint64_t offset = 0;
  Chunk(&chunks, "global", -1, ChunkKind::kGlobal, 100 * kMiB, &offset);
  for (int l = 0; l < 5; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    Chunk(&chunks, p + "attn", l, ChunkKind::kAttention, 20 * kMiB, &offset);
    Chunk(&chunks, p + "ffn", l, ChunkKind::kFfn, (l == 0 ? 30 : 10) * kMiB, &offset);
    for (int e = 0; l > 0 && e < 16; ++e) {
      Chunk(&chunks, p + "expert." + std::to_string(e), l, ChunkKind::kExpert, 4 * kMiB, &offset);
    }
  }
  return chunks;
}

class VramPlanTest : public ::testing::Test {
 protected:
  void Use(std::vector<ChunkSpec> chunks, int experts_per_token) {
    chunks_ = std::move(chunks);
    input_.chunks = chunks_;
    input_.n_ctx = 1024;
    input_.kv_bytes = 30 * kMiB;
    input_.scratch_bytes = 2 * kMiB;
    input_.experts_per_token = experts_per_token;
    input_.vram_scratch_bytes = 10 * kMiB;
    options_.runtime_bytes = 16 * kMiB;  // Fixed RAM: 30 + 2 + 16 = 48 MiB.
  }
  std::vector<ChunkSpec> chunks_;
  PlanInput input_;
  PlanOptions options_;
};

TEST_F(VramPlanTest, WithoutABudgetThePlanIsTheTwoTierOne) {
  Use(Dense(), 0);
  auto plan = PlanMemory(input_, (48 + 100 + 240 + 300) * kMiB, options_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->vram.enabled());
  EXPECT_EQ(plan->in_vram, std::vector<bool>(chunks_.size(), false));
  EXPECT_EQ(plan->token.vram, 0u);
  EXPECT_EQ(plan->token.disk, plan->read_bytes_per_token);
  EXPECT_EQ(plan->token.total(), 1060 * kMiB);  // Every chunk, the global one included.
  EXPECT_EQ(plan->resident.vram, 0u);
  EXPECT_EQ(plan->resident.ram, plan->pool_bytes());
  EXPECT_EQ(plan->Explain().find("VRAM"), std::string::npos) << plan->Explain();

  Use(Moe(), 2);
  auto moe = PlanMemory(input_, (318 + 64 + 2) * kMiB, options_);
  ASSERT_TRUE(moe.ok()) << moe.status();
  EXPECT_EQ(moe->token.disk, moe->read_bytes_per_token);
  EXPECT_EQ(moe->token.disk, 24 * kMiB);
  // Trunk 270 from RAM, and a quarter of the 32 MiB of active experts.
  EXPECT_EQ(moe->token.ram, (270 + 8) * kMiB);
}

TEST_F(VramPlanTest, DenseTrunkGoesUpWholeLayersFirstAndLastPreferred) {
  Use(Dense(), 0);
  // Activations 10 + global 100 + two whole layers 240 + 50: layer 1's
  // attention (40) fits in what is left, its FFN does not.
  options_.vram_budget_bytes = (10 + 100 + 240 + 50) * kMiB;
  const PlanSizes sizes = ComputePlanSizes(input_, options_);
  // The RAM tier holds the rest: 680 MiB, no global chunk.
  EXPECT_EQ(sizes.weight_bytes, 680 * kMiB);
  EXPECT_EQ(sizes.global_bytes, 0u);
  EXPECT_EQ(sizes.floor_bytes, (48 + 2 * 80) * kMiB);
  auto plan = PlanMemory(input_, sizes.floor_bytes, options_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->vram.chunks, (std::vector<ChunkId>{0, 1, 2, 15, 16, 3}));
  EXPECT_TRUE(plan->vram.global);
  EXPECT_EQ(plan->vram.trunk_layers, 2);
  EXPECT_EQ(plan->vram.weight_bytes, 380 * kMiB);
  EXPECT_EQ(plan->vram.unused_bytes, 10 * kMiB);
  for (ChunkId id : plan->vram.chunks) {
    EXPECT_TRUE(plan->in_vram[id]);
    EXPECT_FALSE(plan->is_pinned[id]);
    EXPECT_EQ(std::count(plan->access_order.begin(), plan->access_order.end(), id), 0);
  }
  EXPECT_TRUE(plan->pinned.empty());
  EXPECT_EQ(plan->streaming_slots, 2);
  EXPECT_EQ(plan->access_order.front(), 4);  // Layer 1's FFN, the first chunk streamed.
  EXPECT_EQ(plan->read_bytes_per_token, 680 * kMiB);
  EXPECT_EQ(plan->token.vram, 380 * kMiB);
  EXPECT_EQ(plan->token.ram, 0u);
  EXPECT_EQ(plan->token.disk, 680 * kMiB);
  EXPECT_EQ(plan->resident.vram, 380 * kMiB);
  EXPECT_EQ(plan->resident.ram, 160 * kMiB);
  EXPECT_EQ(plan->resident.disk, 680 * kMiB);
  EXPECT_EQ(plan->n_layers, 8);
  EXPECT_EQ(plan->pinned_layers, 0);
  const std::string text = plan->Explain();
  for (const char* part : {"VRAM budget:  400.00 MiB", "6 of 17 chunks", "2 of 8 layers",
                           "VRAM 380.00 MiB, RAM 0 B, disk 680.00 MiB", "RAM tier"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << " not in:\n" << text;
  }
}

TEST_F(VramPlanTest, RamPinsWhatVramLeaves) {
  Use(Dense(), 0);
  options_.vram_budget_bytes = (10 + 100 + 240) * kMiB;  // Global, layers 0 and 7.
  // RAM: fixed 48 + 3 slots of 80 + 240: the outermost layers left, 6
  // and 1, pinned whole.
  auto plan = PlanMemory(input_, (48 + 240 + 240) * kMiB, options_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->pinned, (std::vector<ChunkId>{13, 14, 3, 4}));
  EXPECT_EQ(plan->pinned_layers, 2);
  EXPECT_EQ(plan->token.vram, 340 * kMiB);
  EXPECT_EQ(plan->token.ram, 240 * kMiB);
  EXPECT_EQ(plan->token.disk, 480 * kMiB);
  EXPECT_EQ(plan->read_bytes_per_token, 480 * kMiB);
  EXPECT_EQ(plan->token.total(), 1060 * kMiB);
}

TEST_F(VramPlanTest, OnlyChunksTheDeviceComputesGoUp) {
  Use(Dense(), 0);
  input_.vram_eligible.assign(chunks_.size(), true);
  input_.vram_eligible[0] = false;   // Global: a type the device lacks.
  input_.vram_eligible[16] = false;  // Layer 7's FFN.
  options_.vram_budget_bytes = (10 + 120 + 40) * kMiB;
  auto plan = PlanMemory(input_, 2000 * kMiB, options_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Layer 0 whole; layer 7's trunk is its attention alone.
  EXPECT_EQ(plan->vram.chunks, (std::vector<ChunkId>{1, 2, 15}));
  EXPECT_FALSE(plan->vram.global);
  EXPECT_EQ(plan->vram.eligible_chunks, 15);
  EXPECT_TRUE(plan->is_pinned[0]);
  EXPECT_TRUE(plan->all_resident());
}

TEST_F(VramPlanTest, CopySlotsAreReservedAndShrinkToWhatIsLeftOut) {
  Use(Dense(), 0);
  options_.vram_copy_slots = 2;
  // Two slots of 80 first, then global and layers 0 and 7.
  options_.vram_budget_bytes = (10 + 160 + 100 + 240) * kMiB;
  VramPlan v = PlaceInVram(input_, options_);
  EXPECT_EQ(v.copy_slots, 2);
  EXPECT_EQ(v.copy_slot_bytes, 80 * kMiB);
  EXPECT_EQ(v.chunks, (std::vector<ChunkId>{0, 1, 2, 15, 16}));
  EXPECT_EQ(v.used_bytes(), v.budget_bytes);

  // FFNs the device cannot compute: slots only for attention chunks (40).
  input_.vram_eligible.assign(chunks_.size(), true);
  for (ChunkId id = 2; id < 17; id += 2) input_.vram_eligible[id] = false;
  options_.vram_budget_bytes = (10 + 80 + 100 + 120) * kMiB;
  v = PlaceInVram(input_, options_);
  EXPECT_EQ(v.copy_slot_bytes, 40 * kMiB);
  EXPECT_EQ(v.chunks.size(), 4u);  // Global + three attention chunks.
  EXPECT_LE(v.used_bytes(), v.budget_bytes);

  // Room for everything: no slot is needed and none is kept.
  options_.vram_budget_bytes = 2000 * kMiB;
  v = PlaceInVram(input_, options_);
  EXPECT_EQ(v.copy_slots, 0);
  EXPECT_EQ(v.copy_slot_bytes, 0u);

  // Too little for the slots after the activations: copy-up is off.
  input_.vram_eligible.clear();
  options_.vram_budget_bytes = (10 + 100) * kMiB;
  v = PlaceInVram(input_, options_);
  EXPECT_EQ(v.copy_slots, 0);
  EXPECT_EQ(v.chunks, std::vector<ChunkId>{0});
}

TEST_F(VramPlanTest, MoeTrunkThenHottestExpertsThenRamThenDisk) {
  Use(Moe(), 2);
  // Layer 2's experts are ids 23..38; the hottest 8 are its last 8.
  for (ChunkId id = 38; id >= 23; --id) input_.expert_preference.push_back(id);
  options_.vram_budget_bytes = (10 + 270 + 32) * kMiB;
  const PlanSizes sizes = ComputePlanSizes(input_, options_);
  EXPECT_TRUE(sizes.moe);
  EXPECT_EQ(sizes.trunk_bytes, 0u);
  EXPECT_EQ(sizes.n_experts, 56);
  EXPECT_EQ(sizes.floor_bytes, (48 + 16) * kMiB);
  // RAM: 14 expert slots, a quarter of the 56 experts not in VRAM.
  auto plan = PlanMemory(input_, (48 + 56) * kMiB, options_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->vram.trunk_layers, 5);
  EXPECT_EQ(plan->vram.experts, 8);
  for (ChunkId id = 31; id <= 38; ++id) EXPECT_TRUE(plan->in_vram[id]) << id;
  for (ChunkId id = 23; id < 31; ++id) EXPECT_FALSE(plan->in_vram[id]) << id;
  EXPECT_EQ(plan->streaming_slots, 14);
  EXPECT_DOUBLE_EQ(plan->expert_cache_fraction, 0.25);
  // Per token: the trunk 270 and 2/16 of layer 2's 8 VRAM experts (4) from
  // VRAM; 28 MiB of experts elsewhere, a quarter from RAM, the rest read.
  EXPECT_EQ(plan->token.vram, 274 * kMiB);
  EXPECT_EQ(plan->token.ram, 7 * kMiB);
  EXPECT_EQ(plan->token.disk, 21 * kMiB);
  EXPECT_EQ(plan->read_bytes_per_token, 21 * kMiB);
  EXPECT_EQ(plan->resident.vram, 302 * kMiB);
  EXPECT_EQ(plan->resident.ram, 56 * kMiB);
  EXPECT_EQ(plan->resident.disk, 224 * kMiB);
  const std::string text = plan->Explain();
  for (const char* part : {"5 of 5 layers' trunk", "8 routed experts", "uniform routing",
                           "VRAM 274.00 MiB, RAM 7.00 MiB, disk 21.00 MiB"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << " not in:\n" << text;
  }
}

TEST_F(VramPlanTest, ExpertsByIdWithoutAPreference) {
  Use(Moe(), 2);
  options_.vram_budget_bytes = (10 + 270 + 8) * kMiB;
  VramPlan v = PlaceInVram(input_, options_);
  EXPECT_EQ(v.experts, 2);
  // Global, the trunk, then layer 1's first two experts (ids 5 and 6).
  EXPECT_EQ(v.chunks[v.chunks.size() - 2], 5);
  EXPECT_EQ(v.chunks.back(), 6);
}

TEST_F(VramPlanTest, EverythingInVramLeavesRamTheFixedCosts) {
  Use(Moe(), 2);
  options_.vram_budget_bytes = 1 << 30;
  auto plan = PlanMemory(input_, 48 * kMiB, options_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->vram.chunks.size(), chunks_.size());
  EXPECT_TRUE(plan->all_resident());
  EXPECT_EQ(plan->pool_bytes(), 0u);
  EXPECT_EQ(plan->token.ram + plan->token.disk, 0u);
  EXPECT_EQ(plan->token.vram, (270 + 32) * kMiB);
  EXPECT_EQ(plan->resident.disk, 0u);
}

TEST_F(VramPlanTest, BudgetUnderTheActivationsIsRefused) {
  Use(Dense(), 0);
  options_.vram_budget_bytes = 5 * kMiB;
  auto plan = PlanMemory(input_, 2000 * kMiB, options_);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(plan.status().message().find("--vram-budget"), std::string::npos);
}

}  // namespace
}  // namespace waste::memory
