#include "daemon/bench/compute_rate.h"

#include <string>

#include "daemon/tools/test_models.h"
#include "gtest/gtest.h"

namespace waste::bench {
namespace {

uint64_t TotalBytes(const std::vector<TypeBytes>& types) {
  uint64_t total = 0;
  for (const TypeBytes& t : types) total += t.bytes;
  return total;
}

absl::StatusOr<tools::testing::LoadedModel> Mixtral(
    const std::string& name, int64_t used, storage::GgmlType type = storage::GgmlType::kQ4_K) {
  tools::MkModelOptions o;
  o.arch = tools::SyntheticArch::kMixtral;
  o.out = ::testing::TempDir() + "/" + name;
  o.dim = 256;
  o.layers = 2;
  o.heads = 4;
  o.ffn = 512;
  o.experts = 8;
  o.experts_used = used;
  o.type = type;
  if (absl::Status s = tools::testing::WriteModel(o, {}); !s.ok()) return s;
  return tools::testing::LoadModel(o.out);
}

// A decode step multiplies its layers' matrices, n_expert_used of each MoE
// layer's experts and the output head: the bytes the chunks hold less the
// token embeddings, the unused experts and the norm vectors.
TEST(ComputeRateTest, ProductBytesAreWhatADecodeStepMultiplies) {
  auto two = Mixtral("compute_top2.gguf", 2);
  ASSERT_TRUE(two.ok()) << two.status();
  const model::Model& m = *two->model;
  uint64_t trunk = 0, experts = 0, n_experts = 0;
  for (const memory::ChunkSpec& c : m.chunks()) {
    if (c.kind == memory::ChunkKind::kExpert) {
      experts += c.tensor_bytes;
      ++n_experts;
    } else if (c.layer >= 0) {
      trunk += c.tensor_bytes;
    }
  }
  const model::GlobalTensors& g = m.globals();
  const uint64_t head = g.output.rows * g.output.row_bytes;
  const uint64_t touched = trunk + head + experts / n_experts * 2 * m.hparams().n_layer;
  const std::vector<TypeBytes> types = ProductBytesByType(m, false);
  // Less only the norms: two f32 vectors of 256 per layer.
  EXPECT_EQ(TotalBytes(types), touched - 2 * 2 * 256 * 4);
  // The router (f32, 8 x 256 per layer) is a product too.
  bool f32 = false;
  for (const TypeBytes& t : types) {
    EXPECT_GT(t.cols, 0);
    if (t.type == kernels::WeightType::kF32) {
      f32 = true;
      EXPECT_EQ(t.bytes, 2u * 8 * 256 * 4);
    }
  }
  EXPECT_TRUE(f32);
  // Two more experts per token: two more experts' bytes per layer.
  auto four = Mixtral("compute_top4.gguf", 4);
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(TotalBytes(ProductBytesByType(*four->model, false)) - TotalBytes(types),
            experts / n_experts * 2 * 2);
}

// Q4_0 is repacked on every ISA when resident: its layer matrices and head
// then count apart from the expert slices, which stay as the file has them;
// streamed, all of them are one entry.
TEST(ComputeRateTest, ResidentRunsCountRepackedMatricesApart) {
  auto loaded = Mixtral("compute_q4_0.gguf", 2, storage::GgmlType::kQ4_0);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const model::Model& m = *loaded->model;
  const model::LayerTensors& l0 = m.layers()[0];
  const uint64_t experts =
      2 * 2 *
      (l0.gate_exps.rows * l0.gate_exps.row_bytes + l0.up_exps.rows * l0.up_exps.row_bytes +
       l0.down_exps.rows * l0.down_exps.row_bytes);
  uint64_t q4_0_plain = 0, q4_0_repacked = 0;
  for (const TypeBytes& t : ProductBytesByType(m, true)) {
    if (t.type != kernels::WeightType::kQ4_0) continue;
    (t.repacked ? q4_0_repacked : q4_0_plain) += t.bytes;
  }
  EXPECT_EQ(q4_0_plain, experts);
  EXPECT_GT(q4_0_repacked, 0u);
  const std::vector<TypeBytes> streamed = ProductBytesByType(m, false);
  EXPECT_EQ(TotalBytes(streamed), TotalBytes(ProductBytesByType(m, true)));
  for (const TypeBytes& t : streamed) {
    EXPECT_FALSE(t.repacked);
    if (t.type == kernels::WeightType::kQ4_0) EXPECT_EQ(t.bytes, q4_0_plain + q4_0_repacked);
  }
}

TEST(ComputeRateTest, ProbesAKernelAndRefusesARaggedWidth) {
  for (bool resident : {false, true}) {
    for (int threads : {1, 2}) {
      const absl::StatusOr<double> gbps =
          MeasureKernelGbps(kernels::WeightType::kQ4_0, 512, resident, threads, 16 << 10, 0.002, 2);
      ASSERT_TRUE(gbps.ok()) << gbps.status();
      EXPECT_GT(*gbps, 0.01) << resident << " " << threads;
    }
  }
  const absl::StatusOr<double> ragged =
      MeasureKernelGbps(kernels::WeightType::kQ4_K, 300, false, 1, 16 << 10, 0.002, 1);
  EXPECT_EQ(ragged.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ComputeRateTest, BoundSumsEachTypesTime) {
  auto loaded = Mixtral("compute_bound.gguf", 2);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const absl::StatusOr<ComputeBound> bound = MeasureComputeBound(*loaded->model, true, 1);
  ASSERT_TRUE(bound.ok()) << bound.status();
  ASSERT_EQ(bound->gbps.size(), bound->types.size());
  double seconds = 0;
  for (size_t i = 0; i < bound->types.size(); ++i) {
    EXPECT_GT(bound->gbps[i], 0);
    seconds += bound->types[i].bytes / (bound->gbps[i] * 1e9);
  }
  EXPECT_DOUBLE_EQ(bound->seconds_per_token, seconds);
  // Of two probes, each type's faster rate counts.
  ASSERT_GE(bound->types.size(), 2u);  // Q4_K, and the f32 router.
  ComputeBound slower = *bound, faster = *bound;
  slower.gbps[0] /= 2;
  faster.gbps.back() *= 2;
  const ComputeBound best = FasterOf(slower, faster);
  EXPECT_EQ(best.gbps[0], bound->gbps[0]);
  EXPECT_EQ(best.gbps.back(), 2 * bound->gbps.back());
  double best_seconds = 0;
  for (size_t i = 0; i < best.types.size(); ++i) {
    best_seconds += best.types[i].bytes / (best.gbps[i] * 1e9);
  }
  EXPECT_DOUBLE_EQ(best.seconds_per_token, best_seconds);
}

}  // namespace
}  // namespace waste::bench
