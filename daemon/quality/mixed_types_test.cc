// A MoE file whose matrices mix types the way real large-model files do
// (experts of one layer Q2_K, another's down projection Q6_K, attention
// Q5_K, embeddings Q3_K, the rest Q4_K): quantize --tensor-type writes it,
// inspect and the memory plan count every tensor at its own type's size
// (bytes per token included), and it loads and runs.
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "daemon/cache/resident_store.h"
#include "daemon/kernels/thread_pool.h"
#include "daemon/memory/plan.h"
#include "daemon/model/forward.h"
#include "daemon/model/layout.h"
#include "daemon/model/model.h"
#include "daemon/model/model_plan.h"
#include "daemon/quality/quantize_model.h"
#include "daemon/tools/inspect.h"
#include "daemon/tools/synthetic_model.h"
#include "gtest/gtest.h"
#include "storage/env.h"
#include "storage/gguf.h"
#include "storage/split_gguf_testing.h"
#include "tests/testdata.h"

namespace waste::quality {
namespace {

using storage::GgmlType;

constexpr int kExperts = 4;
constexpr int kUsed = 2;

// Writes the F32 model and its mixed quantization; returns the latter.
std::string WriteMixedModel(const std::string& dir) {
  tools::MkModelOptions mk;
  mk.arch = tools::SyntheticArch::kQwen3Moe;
  mk.out = dir + "/moe-f32.gguf";
  mk.dim = 256;
  mk.layers = 3;
  mk.heads = 4;
  mk.experts = kExperts;
  mk.experts_used = kUsed;
  mk.expert_ffn = 256;
  mk.ffn = 512;
  mk.ctx = 256;
  mk.type = GgmlType::kF32;
  mk.threads = 2;
  EXPECT_TRUE(tools::WriteSyntheticModel(mk, storage::Env::Default()).ok());
  QuantizeOptions options;
  options.type = GgmlType::kQ4_K;
  options.threads = 2;
  for (const char* flag :
       {"blk.0.ffn_*_exps.weight=q2_k", "blk.1.ffn_down_exps.weight=q6_k",
        "blk.2.ffn_*_exps.weight=iq4_xs", "blk.1.attn_*.weight=q5_k", "token_embd.weight=q3_k"}) {
    absl::StatusOr<QuantizeOptions::TensorTypeOverride> o = ParseTensorTypeOverride(flag);
    EXPECT_TRUE(o.ok()) << o.status();
    if (o.ok()) options.tensor_types.push_back(*o);
  }
  const std::string out = dir + "/moe-mixed.gguf";
  absl::StatusOr<QuantizeReport> report =
      QuantizeModel(storage::Env::Default(), mk.out, out, options);
  EXPECT_TRUE(report.ok()) << report.status();
  return out;
}

class MixedTypesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::TempDir());
    path_ = new std::string(WriteMixedModel(*dir_));
  }
  static void TearDownTestSuite() {
    delete path_;
    delete dir_;
  }
  static std::unique_ptr<storage::GgufFile> Open() {
    auto gguf = storage::GgufFile::Open(storage::Env::Default(), *path_);
    EXPECT_TRUE(gguf.ok()) << gguf.status();
    return gguf.ok() ? std::move(*gguf) : nullptr;
  }
  static std::string* dir_;
  static std::string* path_;
};
std::string* MixedTypesTest::dir_ = nullptr;
std::string* MixedTypesTest::path_ = nullptr;

// A model split by gguf-split quantizes from its first part into one file,
// byte for byte the quantization of the whole file (no split.* keys).
TEST(QuantizeSplitTest, PartsQuantizeAsTheWholeFile) {
  const std::string dir = testing::TempDir();
  tools::MkModelOptions mk;
  mk.out = dir + "/quantize_split.gguf";
  mk.dim = 256;
  mk.layers = 2;
  mk.heads = 4;
  mk.ffn = 512;
  mk.ctx = 256;
  mk.type = GgmlType::kF32;
  mk.threads = 2;
  storage::Env* env = storage::Env::Default();
  ASSERT_TRUE(tools::WriteSyntheticModel(mk, env).ok());
  auto parts = storage::testing::WriteSplitParts(env, mk.out, 3);
  ASSERT_TRUE(parts.ok()) << parts.status();
  QuantizeOptions options;
  options.type = GgmlType::kQ4_K;
  options.threads = 2;
  ASSERT_TRUE(QuantizeModel(env, mk.out, dir + "/whole-q4_k.gguf", options).ok());
  absl::StatusOr<QuantizeReport> report =
      QuantizeModel(env, (*parts)[0], dir + "/parts-q4_k.gguf", options);
  ASSERT_TRUE(report.ok()) << report.status();
  auto whole = storage::ReadFileToString(env, dir + "/whole-q4_k.gguf");
  auto from_parts = storage::ReadFileToString(env, dir + "/parts-q4_k.gguf");
  ASSERT_TRUE(whole.ok() && from_parts.ok());
  EXPECT_TRUE(*whole == *from_parts) << "the quantization of the parts differs from the whole's";
  auto gguf = storage::GgufFile::Open(env, dir + "/parts-q4_k.gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  EXPECT_EQ((*gguf)->split_count(), 1);
}

TEST_F(MixedTypesTest, TensorTypeOverridesApply) {
  std::unique_ptr<storage::GgufFile> g = Open();
  ASSERT_NE(g, nullptr);
  auto type = [&](const std::string& name) { return g->FindTensor(name)->type; };
  EXPECT_EQ(type("blk.0.ffn_gate_exps.weight"), GgmlType::kQ2_K);
  EXPECT_EQ(type("blk.0.ffn_down_exps.weight"), GgmlType::kQ2_K);
  EXPECT_EQ(type("blk.1.ffn_gate_exps.weight"), GgmlType::kQ4_K);
  EXPECT_EQ(type("blk.1.ffn_down_exps.weight"), GgmlType::kQ6_K);
  EXPECT_EQ(type("blk.2.ffn_up_exps.weight"), GgmlType::kIQ4_XS);
  EXPECT_EQ(type("blk.1.attn_q.weight"), GgmlType::kQ5_K);
  EXPECT_EQ(type("blk.0.attn_q.weight"), GgmlType::kQ4_K);
  EXPECT_EQ(type("token_embd.weight"), GgmlType::kQ3_K);
  EXPECT_EQ(type("output.weight"), GgmlType::kQ6_K);  // llama.cpp's head rule.
  EXPECT_EQ(type("blk.0.ffn_gate_inp.weight"), GgmlType::kF32);

  EXPECT_FALSE(ParseTensorTypeOverride("no-equals").ok());
  EXPECT_FALSE(ParseTensorTypeOverride("x=q9_k").ok());
  // A type that needs an importance matrix, asked of one tensor.
  QuantizeOptions options;
  options.type = GgmlType::kQ4_K;
  options.tensor_types.push_back(*ParseTensorTypeOverride("blk.0.attn_q.weight=iq2_xxs"));
  absl::StatusOr<QuantizeReport> refused =
      QuantizeModel(storage::Env::Default(), *dir_ + "/moe-f32.gguf", *dir_ + "/x.gguf", options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "blk.0.attn_q.weight"));
}

// What a token reads, tensor by tensor at its own size: each MoE layer's
// routed experts as used / n_expert of that layer's tensors, one row of
// the embeddings, everything else whole.
uint64_t ExpectedBytesPerToken(const storage::GgufFile& g) {
  uint64_t bytes = 0;
  for (const storage::TensorInfo& t : g.tensors()) {
    if (absl::StrContains(t.name, "_exps.")) {
      bytes += t.size / kExperts * kUsed;
    } else if (t.name == "token_embd.weight") {
      bytes += t.size / t.NumRows();
    } else {
      bytes += t.size;
    }
  }
  return bytes;
}

TEST_F(MixedTypesTest, InspectCountsEveryTensorAtItsType) {
  std::unique_ptr<storage::GgufFile> g = Open();
  ASSERT_NE(g, nullptr);
  absl::StatusOr<model::ModelLayout> layout = model::ModelLayout::FromGguf(*g);
  ASSERT_TRUE(layout.ok()) << layout.status();
  const uint64_t want = ExpectedBytesPerToken(*g);
  EXPECT_EQ(layout->ActiveBytesPerToken(), want);
  // Each layer's expert at its own size: Q2_K < Q4_K + Q6_K down < Q4_K.
  ASSERT_EQ(layout->layers().size(), 3u);
  for (int l = 0; l < 3; ++l) {
    uint64_t routed = 0;
    for (const char* p : {"gate", "up", "down"}) {
      routed += g->FindTensor("blk." + std::to_string(l) + ".ffn_" + p + "_exps.weight")->size;
    }
    EXPECT_EQ(layout->layers()[l].expert_bytes, routed / kExperts) << l;
  }
  EXPECT_LT(layout->min_expert_bytes(), layout->expert_bytes());
  EXPECT_EQ(layout->min_expert_bytes(), layout->layers()[0].expert_bytes);

  absl::StatusOr<std::string> json = tools::InspectModel(storage::Env::Default(), *path_, true);
  ASSERT_TRUE(json.ok()) << json.status();
  const nlohmann::json doc = nlohmann::json::parse(*json);
  EXPECT_EQ(doc.at("active_bytes_per_token").get<uint64_t>(), want);
  EXPECT_EQ(doc.at("min_expert_bytes").get<uint64_t>(), layout->layers()[0].expert_bytes);
  for (const char* type : {"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS", "F32"}) {
    EXPECT_TRUE(doc.at("bytes_by_type").contains(type)) << type;
  }
  absl::StatusOr<std::string> text = tools::InspectModel(storage::Env::Default(), *path_, false);
  ASSERT_TRUE(text.ok());
  EXPECT_TRUE(absl::StrContains(*text, " to ")) << *text;  // The expert size range.
}

// The plan reads each streamed expert at its own size: per token, top-k of
// each layer's mean expert read (layers' experts differ), not a single
// expert size times k times the layers.
TEST_F(MixedTypesTest, PlanReadsPerTokenAtEachExpertsSize) {
  std::unique_ptr<storage::GgufFile> g = Open();
  ASSERT_NE(g, nullptr);
  absl::StatusOr<std::unique_ptr<model::Model>> m = model::Model::Create(*g);
  ASSERT_TRUE(m.ok()) << m.status();
  const memory::PlanInput input =
      model::PlanInputFor(**m, 256, kernels::ops::KvType::kF16, /*max_sessions=*/1);
  uint64_t want_read = 0;  // k x the mean expert read of each layer.
  std::vector<uint64_t> layer_read(3, 0);
  for (const memory::ChunkSpec& c : (*m)->chunks()) {
    if (c.kind != memory::ChunkKind::kExpert) continue;
    for (const memory::ChunkRead& r : c.reads) layer_read[c.layer] += r.length;
  }
  for (uint64_t bytes : layer_read) want_read += kUsed * bytes / kExperts;
  EXPECT_NE(layer_read[0], layer_read[1]);
  absl::StatusOr<memory::MemoryPlan> plan = memory::PlanMemory(input, 1ull << 40);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->read_bytes_per_token, 0u);  // Everything fits.
  EXPECT_NEAR(static_cast<double>(plan->sizes.active_expert_read_bytes),
              static_cast<double>(want_read), 3.0 * kUsed);
  // With the trunk pinned and the experts streamed, a token reads the
  // uncached share of that, and its row of the embedding table (on disk).
  const uint64_t active = plan->sizes.active_expert_read_bytes;
  plan = memory::PlanMemory(input, plan->sizes.trunk_floor_bytes);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_LT(plan->expert_cache_fraction, 1);
  EXPECT_GT(plan->read_bytes_per_token, 0u);
  EXPECT_TRUE(plan->embeddings_on_disk);
  EXPECT_NEAR(static_cast<double>(plan->read_bytes_per_token - plan->sizes.embedding_row_bytes),
              (1 - plan->expert_cache_fraction) * static_cast<double>(active), 1.0);
}

TEST_F(MixedTypesTest, LoadsAndRuns) {
  std::unique_ptr<storage::GgufFile> g = Open();
  ASSERT_NE(g, nullptr);
  absl::StatusOr<std::unique_ptr<model::Model>> m = model::Model::Create(*g);
  ASSERT_TRUE(m.ok()) << m.status();
  storage::Env* env = storage::Env::Default();
  auto file = env->NewRandomAccessFile(*path_);
  ASSERT_TRUE(file.ok());
  auto store = cache::ResidentChunkStore::Load(env, **file, (*m)->chunks(), {});
  ASSERT_TRUE(store.ok()) << store.status();
  kernels::ThreadPool pool(2);
  model::SequenceState state(**m, 64, kernels::ops::KvType::kF16);
  model::Forward forward(m->get(), store->get(), &pool);
  const std::vector<int32_t> tokens = {1, 17, 42, 99, 5, 63, 7, 200};
  std::vector<float> logits((*m)->hparams().n_vocab * tokens.size());
  ASSERT_TRUE(forward.Run(&state, tokens, logits.data(), /*all_logits=*/true).ok());
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  EXPECT_GT(forward.moe_stats().routed, 0);
}

}  // namespace
}  // namespace waste::quality
