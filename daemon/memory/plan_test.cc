#include "daemon/memory/plan.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace waste::memory {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// A dense model's chunks: global, then attention and FFN per layer, laid
// out back to back in a file.
std::vector<ChunkSpec> DenseChunks(int layers, uint64_t global, uint64_t attn, uint64_t ffn) {
  std::vector<ChunkSpec> chunks;
  uint64_t offset = 0;
  auto add = [&](std::string name, int layer, ChunkKind kind, uint64_t bytes) {
    ChunkSpec c;
    c.id = static_cast<ChunkId>(chunks.size());
    c.name = std::move(name);
    c.layer = layer;
    c.kind = kind;
    c.reads.push_back({offset, bytes, 0});
    c.slot_bytes = c.tensor_bytes = bytes;
    offset += bytes;
    chunks.push_back(std::move(c));
  };
  add("global", -1, ChunkKind::kGlobal, global);
  for (int l = 0; l < layers; ++l) {
    add("blk." + std::to_string(l) + ".attn", l, ChunkKind::kAttention, attn);
    add("blk." + std::to_string(l) + ".ffn", l, ChunkKind::kFfn, ffn);
  }
  return chunks;
}

class PlanTest : public ::testing::Test {
 protected:
  PlanTest() : chunks_(DenseChunks(8, 100 * kMiB, 40 * kMiB, 80 * kMiB)) {
    input_.chunks = chunks_;
    input_.n_ctx = 1024;
    input_.kv_bytes = 30 * kMiB;
    input_.scratch_bytes = 2 * kMiB;
    options_.runtime_bytes = 16 * kMiB;
  }
  // 100 + 8 * 120 = 1060 MiB of weights, 48 MiB fixed.
  std::vector<ChunkSpec> chunks_;
  PlanInput input_;
  PlanOptions options_;
};

TEST_F(PlanTest, FloorAndRecommended) {
  PlanSizes s = ComputePlanSizes(input_, options_);
  EXPECT_EQ(s.weight_bytes, 1060 * kMiB);
  EXPECT_EQ(s.largest_streamed_slot, 80 * kMiB);
  EXPECT_EQ(s.floor_bytes, (100 + 30 + 2 + 16 + 160) * kMiB);
  EXPECT_EQ(s.recommended_bytes, (1060 + 48) * kMiB);
  EXPECT_FALSE(s.recommended_capped);

  PlanSizes capped = ComputePlanSizes(input_, options_, 800 * kMiB, "test");
  EXPECT_TRUE(capped.recommended_capped);
  // 10% of usable is less than the 1 GiB reserve, and usable - 1 GiB < floor.
  EXPECT_EQ(capped.recommended_bytes, capped.floor_bytes);
  options_.system_reserve_bytes = 100 * kMiB;
  capped = ComputePlanSizes(input_, options_, 800 * kMiB, "test");
  EXPECT_EQ(capped.recommended_bytes, 700 * kMiB);
}

// A model with its own output head keeps its embedding table in a chunk of
// its own: outside the floor, pinned only when everything else is, else
// each token reads one row of it from disk.
TEST_F(PlanTest, EmbeddingsStayOnDiskUnlessEverythingFits) {
  ChunkSpec embd;
  embd.id = static_cast<ChunkId>(chunks_.size());
  embd.name = "embeddings";
  embd.kind = ChunkKind::kEmbeddings;
  embd.reads.push_back({2000 * kMiB, 200 * kMiB, 0});
  embd.slot_bytes = embd.tensor_bytes = 200 * kMiB;
  embd.row_bytes = 8192;
  chunks_.push_back(embd);
  input_.chunks = chunks_;
  const PlanSizes s = ComputePlanSizes(input_, options_);
  EXPECT_EQ(s.weight_bytes, 1260 * kMiB);
  EXPECT_EQ(s.embedding_bytes, 200 * kMiB);
  EXPECT_EQ(s.largest_streamed_slot, 80 * kMiB);  // Not the 200 MiB table.
  EXPECT_EQ(s.floor_bytes, (100 + 48 + 160) * kMiB);
  EXPECT_EQ(s.recommended_bytes, (1260 + 48) * kMiB);

  auto floor = PlanMemory(input_, s.floor_bytes, options_);
  ASSERT_TRUE(floor.ok()) << floor.status();
  EXPECT_FALSE(floor->is_pinned[embd.id]);
  EXPECT_TRUE(floor->embeddings_on_disk);
  EXPECT_EQ(std::count(floor->access_order.begin(), floor->access_order.end(), embd.id), 0);
  // Every layer chunk, and one row of the table.
  EXPECT_EQ(floor->read_bytes_per_token, 8 * 120 * kMiB + 8192);
  EXPECT_NE(floor->Explain().find("embeddings: 200.00 MiB stay on disk"), std::string::npos)
      << floor->Explain();

  // A MiB short of everything: the table stays on disk.
  auto short_of_all = PlanMemory(input_, s.recommended_bytes - kMiB, options_);
  ASSERT_TRUE(short_of_all.ok()) << short_of_all.status();
  EXPECT_FALSE(short_of_all->is_pinned[embd.id]);
  EXPECT_GE(short_of_all->read_bytes_per_token, 8192u);

  auto all = PlanMemory(input_, s.recommended_bytes, options_);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE(all->is_pinned[embd.id]);
  EXPECT_FALSE(all->embeddings_on_disk);
  EXPECT_EQ(all->read_bytes_per_token, 0u);
}

TEST_F(PlanTest, SessionsAreReservedBeforeWeightsArePinned) {
  input_.max_sessions = 4;
  PlanSizes s = ComputePlanSizes(input_, options_);
  // The floor runs one session; everything resident holds four.
  EXPECT_EQ(s.floor_bytes, (100 + 30 + 2 + 16 + 160) * kMiB);
  EXPECT_EQ(s.recommended_bytes, (1060 + 48 + 3 * 30) * kMiB);

  auto at_floor = PlanMemory(input_, s.floor_bytes, options_);
  ASSERT_TRUE(at_floor.ok()) << at_floor.status();
  EXPECT_EQ(at_floor->sessions, 1);
  EXPECT_EQ(at_floor->sessions_that_fit, 1);

  // 65 MiB above the floor: two more sessions' KV caches, and no layer
  // pinned with what is left.
  auto two_more = PlanMemory(input_, s.floor_bytes + 65 * kMiB, options_);
  ASSERT_TRUE(two_more.ok()) << two_more.status();
  EXPECT_EQ(two_more->sessions, 3);
  EXPECT_EQ(two_more->sessions_that_fit, 3);
  EXPECT_EQ(two_more->kv_total_bytes(), 90 * kMiB);
  EXPECT_EQ(two_more->unused_bytes, 5 * kMiB);
  EXPECT_LE(two_more->kv_total_bytes() + input_.scratch_bytes + options_.runtime_bytes +
                two_more->pool_bytes(),
            two_more->budget_bytes);

  // Enough for everything: four sessions, all weights resident.
  auto all = PlanMemory(input_, s.recommended_bytes, options_);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->sessions, 4);
  EXPECT_TRUE(all->all_resident());
  EXPECT_NE(all->Explain().find("4 run together"), std::string::npos) << all->Explain();
}

TEST_F(PlanTest, EverythingResidentWhenItFits) {
  auto plan = PlanMemory(input_, (1060 + 48) * kMiB, options_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->all_resident());
  EXPECT_EQ(plan->pinned.size(), chunks_.size());
  EXPECT_EQ(plan->pinned_layers, 8);
  EXPECT_EQ(plan->read_bytes_per_token, 0u);
  EXPECT_EQ(plan->unused_bytes, 0u);
}

TEST_F(PlanTest, AtTheFloorOnlyGlobalIsPinnedAndTwoSlotsStream) {
  uint64_t floor = ComputePlanSizes(input_, options_).floor_bytes;
  auto plan = PlanMemory(input_, floor, options_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->pinned, std::vector<ChunkId>{0});
  EXPECT_EQ(plan->streaming_slots, 2);
  EXPECT_EQ(plan->slot_bytes, 80 * kMiB);
  EXPECT_EQ(plan->prefetch_depth, 1);
  EXPECT_EQ(plan->read_bytes_per_token, 960 * kMiB);
  EXPECT_EQ(plan->streamed_chunks, 16);
  EXPECT_EQ(plan->access_order.size(), 16u);
  EXPECT_EQ(plan->access_order.front(), 1);
  EXPECT_EQ(plan->pool_bytes(), 260 * kMiB);
}

// Streamed weights are read once per step: where they stream, a prompt
// gets the largest step whose extra scratch the budget holds (within a
// sixteenth of it, and above the floor), which the weights' share pays for;
// resident or at the floor, the small ones.
TEST_F(PlanTest, StreamingPlansTakeLargerStepsWhereTheBudgetHoldsThem) {
  input_.step_tokens = 64;
  input_.streaming_steps = {{256, 2 * kMiB + 48 * kMiB}, {128, 2 * kMiB + 16 * kMiB}};
  auto resident = PlanMemory(input_, (1060 + 48) * kMiB, options_);
  ASSERT_TRUE(resident.ok()) << resident.status();
  EXPECT_TRUE(resident->all_resident());
  EXPECT_EQ(resident->step_tokens, 64);
  EXPECT_EQ(resident->sizes.scratch_bytes, 2 * kMiB);

  // 688 MiB: 48 MiB more is over a sixteenth, 16 MiB is not.
  const uint64_t budget = (48 + 100 + 240 + 300) * kMiB;
  auto larger = PlanMemory(input_, budget, options_);
  const std::vector<PlanInput::StepSize> steps = std::move(input_.streaming_steps);
  input_.streaming_steps.clear();
  auto one_size = PlanMemory(input_, budget, options_);
  ASSERT_TRUE(larger.ok() && one_size.ok());
  EXPECT_EQ(larger->step_tokens, 128);
  EXPECT_EQ(larger->sizes.scratch_bytes, 18 * kMiB);
  EXPECT_EQ(one_size->step_tokens, 64);
  // The 16 MiB come out of the weights' share of the budget.
  EXPECT_EQ(larger->pool_bytes() + larger->unused_bytes + 16 * kMiB,
            one_size->pool_bytes() + one_size->unused_bytes);
  EXPECT_NE(larger->Explain().find("one step of up to 128 tokens"), std::string::npos)
      << larger->Explain();
  input_.streaming_steps = steps;
  auto roomy = PlanMemory(input_, 1000 * kMiB, options_);
  ASSERT_TRUE(roomy.ok()) << roomy.status();
  EXPECT_FALSE(roomy->all_resident());
  EXPECT_EQ(roomy->step_tokens, 256);

  const uint64_t floor = ComputePlanSizes(input_, options_).floor_bytes;
  auto at_floor = PlanMemory(input_, floor, options_);
  ASSERT_TRUE(at_floor.ok()) << at_floor.status();
  EXPECT_EQ(at_floor->step_tokens, 64);
}

TEST_F(PlanTest, PinsWholeLayersFirstAndLastPreferred) {
  // Fixed 48 + global 100 + 3 slots 240 + 2.5 layers of 120.
  auto plan = PlanMemory(input_, (48 + 100 + 240 + 300) * kMiB, options_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->streaming_slots, 3);
  EXPECT_EQ(plan->prefetch_depth, 2);
  EXPECT_EQ(plan->pinned_layers, 2);
  // Global, layer 0, layer 7, then the half layer's worth: layer 1's attention
  // (40) fits in the 60 left, its FFN (80) does not.
  std::vector<ChunkId> want = {0, 1, 2, 15, 16, 3};
  EXPECT_EQ(plan->pinned, want);
  EXPECT_EQ(plan->read_bytes_per_token, (1060 - 100 - 240 - 40) * kMiB);
  EXPECT_EQ(plan->unused_bytes, 20 * kMiB);
  EXPECT_NE(plan->Explain().find("2 of 8 whole layers"), std::string::npos) << plan->Explain();
}

TEST_F(PlanTest, SlotsShrinkWhenOnlySmallChunksStream) {
  // Room for every FFN but not every attention: slots hold attention only.
  std::vector<ChunkSpec> chunks = DenseChunks(2, 10 * kMiB, 40 * kMiB, 80 * kMiB);
  input_.chunks = chunks;
  // Fixed 48 + global 10 + 3 slots of 80 (240) + 160 = 458: pins layer 0
  // whole (120), then layer 1's attention (40). Nothing streams any more.
  auto plan = PlanMemory(input_, (48 + 10 + 240 + 160) * kMiB, options_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->all_resident()) << plan->Explain();
  EXPECT_EQ(plan->read_bytes_per_token, 0u);
}

TEST_F(PlanTest, BudgetUnderTheFloorIsRefusedWithTheNumbers) {
  uint64_t floor = ComputePlanSizes(input_, options_).floor_bytes;
  auto plan = PlanMemory(input_, floor - 1, options_);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string message(plan.status().message());
  for (const char* part :
       {"floor of 308.00 MiB (322961408 bytes", "pinned global chunk 100.00 MiB",
        "KV cache for 1024 tokens 30.00 MiB", "2 streaming slots of 80.00 MiB", "wasted plan"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
  }
}

// A MoE model: global 100 MiB; per layer attention 20 and a trunk (norm,
// router, shared expert) 10; layer 0 dense (FFN 30), layers 1..4 with 16
// experts of 4 MiB each; top-2.
std::vector<ChunkSpec> MoeChunks() {
  std::vector<ChunkSpec> chunks = DenseChunks(0, 100 * kMiB, 0, 0);
  uint64_t offset = 100 * kMiB;
  auto add = [&](std::string name, int layer, ChunkKind kind, uint64_t bytes) {
    ChunkSpec c;
    c.id = static_cast<ChunkId>(chunks.size());
    c.name = std::move(name);
    c.layer = layer;
    c.kind = kind;
    c.reads.push_back({offset, bytes, 0});
    c.slot_bytes = c.tensor_bytes = bytes;
    offset += bytes;
    chunks.push_back(std::move(c));
  };
  for (int l = 0; l < 5; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn", l, ChunkKind::kAttention, 20 * kMiB);
    add(p + "ffn", l, ChunkKind::kFfn, (l == 0 ? 30 : 10) * kMiB);
    for (int e = 0; l > 0 && e < 16; ++e) {
      add(p + "expert." + std::to_string(e), l, ChunkKind::kExpert, 4 * kMiB);
    }
  }
  return chunks;
}

class MoePlanTest : public ::testing::Test {
 protected:
  MoePlanTest() : chunks_(MoeChunks()) {
    input_.chunks = chunks_;
    input_.n_ctx = 1024;
    input_.kv_bytes = 30 * kMiB;
    input_.scratch_bytes = 2 * kMiB;
    input_.experts_per_token = 2;
    options_.runtime_bytes = 16 * kMiB;
  }
  // Trunk 100 + 50 + 4 x 30 = 270 MiB; experts 64 x 4 = 256 MiB; fixed 48.
  std::vector<ChunkSpec> chunks_;
  PlanInput input_;
  PlanOptions options_;
};

TEST_F(MoePlanTest, SizesCountTheTrunkAndTopKExperts) {
  PlanSizes s = ComputePlanSizes(input_, options_);
  EXPECT_TRUE(s.moe);
  EXPECT_EQ(s.trunk_bytes, 270 * kMiB);
  EXPECT_EQ(s.expert_bytes, 256 * kMiB);
  EXPECT_EQ(s.n_experts, 64);
  EXPECT_EQ(s.moe_layers, 4);
  EXPECT_EQ(s.expert_slot_bytes, 4 * kMiB);
  // top-2 x 4 layers x 4 MiB.
  EXPECT_EQ(s.expert_working_set_bytes, 32 * kMiB);
  EXPECT_EQ(s.active_expert_read_bytes, 32 * kMiB);
  // Trunk + fixed + 2 x top-2 slots.
  EXPECT_EQ(s.trunk_floor_bytes, (270 + 48 + 16) * kMiB);
  EXPECT_EQ(s.largest_trunk_slot, 30 * kMiB);  // Layer 0's dense FFN.
  // The trunk streamed: global + fixed + (2 x top-2 + 2) expert slots and
  // 3 trunk slots of 30 MiB (not 6 slots all of 30).
  EXPECT_EQ(s.floor_bytes, (100 + 48 + 6 * 4 + 3 * 30) * kMiB);
  EXPECT_EQ(s.recommended_bytes, (270 + 256 + 48) * kMiB);

  // Usable 560 MiB less a 100 MiB reserve leaves 142 MiB past trunk + fixed
  // (318): 4 whole working sets of 32.
  options_.system_reserve_bytes = 100 * kMiB;
  PlanSizes capped = ComputePlanSizes(input_, options_, 560 * kMiB, "test");
  EXPECT_TRUE(capped.recommended_capped);
  EXPECT_EQ(capped.recommended_bytes, (318 + 4 * 32) * kMiB);
}

TEST_F(MoePlanTest, TrunkPinnedExpertsCachedMissesExpected) {
  // Trunk + fixed + 16 expert slots (a quarter of the experts).
  auto plan = PlanMemory(input_, (318 + 64 + 2) * kMiB, options_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->all_resident());
  EXPECT_EQ(plan->pinned_bytes, 270 * kMiB);
  EXPECT_EQ(plan->pinned.size(), 11u);  // Global + 5 x (attention, trunk).
  for (ChunkId id : plan->pinned) EXPECT_NE(chunks_[id].kind, ChunkKind::kExpert);
  EXPECT_EQ(plan->streaming_slots, 16);
  EXPECT_EQ(plan->slot_bytes, 4 * kMiB);
  EXPECT_DOUBLE_EQ(plan->expert_cache_fraction, 0.25);
  // Uniform routing: three quarters of 32 MiB of active experts miss.
  EXPECT_EQ(plan->read_bytes_per_token, 24 * kMiB);
  EXPECT_EQ(plan->streamed_chunks, 64);
  EXPECT_TRUE(plan->access_order.empty());
  EXPECT_EQ(plan->prefetch_depth, 4);  // 2 x top-2.
  EXPECT_EQ(plan->unused_bytes, 2 * kMiB);
  EXPECT_EQ(plan->pinned_layers, 1);  // The dense layer 0.
  const std::string text = plan->Explain();
  for (const char* part :
       {"trunk 270.00 MiB", "top-2 x 4 layers = 8 experts", "16 slots x 4.00 MiB",
        "25.0% of the experts", "uniform routing", "trunk floor:  334.00 MiB",
        "floor:        262.00 MiB (the trunk streamed too", "6 expert slots of 4.00 MiB",
        "3 trunk slots of 30.00 MiB", "the whole trunk, 11 chunks"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << " not in:\n" << text;
  }
}

TEST_F(MoePlanTest, AtTheTrunkFloorTwiceTopKSlots) {
  uint64_t floor = ComputePlanSizes(input_, options_).trunk_floor_bytes;
  auto plan = PlanMemory(input_, floor, options_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->streaming_slots, 4);
  EXPECT_EQ(plan->prefetch_depth, 3);
  EXPECT_EQ(plan->read_bytes_per_token, 30 * kMiB);  // (1 - 4/64) x 32 MiB.
}

TEST_F(MoePlanTest, EverythingResidentWhenItFits) {
  auto plan = PlanMemory(input_, (270 + 256 + 48) * kMiB, options_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->all_resident());
  EXPECT_EQ(plan->pinned.size(), chunks_.size());
  EXPECT_EQ(plan->read_bytes_per_token, 0u);
  EXPECT_EQ(plan->pinned_layers, 5);
}

TEST_F(MoePlanTest, BelowTheTrunkFloorTheTrunkStreams) {
  // Top-1: the trunk floor is 270 + 48 + 2 x 4 = 326 MiB; streamed, the
  // floor is 100 + 48 + 4 expert slots of 4 + 3 trunk slots of 30 = 254.
  input_.experts_per_token = 1;
  const PlanSizes sizes = ComputePlanSizes(input_, options_);
  EXPECT_EQ(sizes.trunk_floor_bytes, 326 * kMiB);
  EXPECT_EQ(sizes.floor_bytes, 254 * kMiB);
  // 64 MiB past the floor pin layer 0 (preferred first: attention 20 +
  // dense FFN 30) whole, then layer 4's FFN trunk (10); the rest streams.
  auto plan = PlanMemory(input_, 318 * kMiB, options_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->trunk_streamed);
  EXPECT_FALSE(plan->all_resident());
  EXPECT_EQ(plan->pinned_bytes, 160 * kMiB);
  EXPECT_EQ(plan->streamed_trunk_chunks, 7);
  // The attention chunks (20 MiB, larger than an expert) get 3 slots of
  // their own; the rest of the room is expert-sized: (318 - 48 - 160 - 60) / 4.
  EXPECT_EQ(plan->large_slots, 3);
  EXPECT_EQ(plan->large_slot_bytes, 20 * kMiB);
  EXPECT_EQ(plan->slot_bytes, 4 * kMiB);
  EXPECT_EQ(plan->streaming_slots, 12 + 3);
  EXPECT_EQ(plan->streaming_bytes, (12 * 4 + 3 * 20) * kMiB);
  EXPECT_EQ(plan->access_order.size(), 7u);
  for (ChunkId id : plan->access_order) {
    EXPECT_FALSE(plan->is_pinned[id]);
    EXPECT_NE(chunks_[id].kind, ChunkKind::kExpert);
    EXPECT_NE(chunks_[id].kind, ChunkKind::kGlobal);
  }
  // 4 attention chunks of 20 and 3 FFN trunks of 10, plus 4 experts of 4.
  EXPECT_EQ(plan->read_bytes_per_token, (80 + 30 + 16) * kMiB);
  EXPECT_EQ(plan->prefetch_depth, 2);
  EXPECT_EQ(plan->pinned_layers, 1);
  const std::string text = plan->Explain();
  for (const char* part :
       {"12 slots x 4.00 MiB + 3 trunk slots x 20.00 MiB", "7 trunk chunks and every expert",
        "none assumed cached", "floor:        254.00 MiB (the trunk streamed too"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << " not in:\n" << text;
  }
  // At the floor: only the global chunk pinned, 3 slots of the largest
  // trunk chunk (layer 0's FFN) and 4 of an expert.
  auto floor = PlanMemory(input_, 254 * kMiB, options_);
  ASSERT_TRUE(floor.ok()) << floor.status();
  EXPECT_EQ(floor->pinned_bytes, 100 * kMiB);
  EXPECT_EQ(floor->streaming_slots, 4 + 3);
  EXPECT_EQ(floor->large_slot_bytes, 30 * kMiB);
  EXPECT_EQ(floor->slot_bytes, 4 * kMiB);
  EXPECT_EQ(floor->prefetch_depth, 2);
  EXPECT_EQ(floor->streamed_trunk_chunks, 10);
  EXPECT_EQ(floor->unused_bytes, 0u);
}

TEST_F(MoePlanTest, BudgetUnderTheFloorIsRefused) {
  auto plan = PlanMemory(input_, 250 * kMiB, options_);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string message(plan.status().message());
  for (const char* part :
       {"floor of 262.00 MiB", "output head (and tied embeddings) 100.00 MiB",
        "streaming slots 114.00 MiB", "270.00 MiB pinned it takes 334.00", "wasted plan"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
  }
  input_.experts_per_token = 0;
  EXPECT_EQ(PlanMemory(input_, 1 << 30, options_).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace waste::memory
