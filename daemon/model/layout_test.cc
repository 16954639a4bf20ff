#include "daemon/model/layout.h"

#include <memory>
#include <string>

#include "daemon/tools/synthetic_model.h"
#include "gtest/gtest.h"
#include "storage/gguf.h"
#include "storage/gguf_testing.h"
#include "storage/gguf_writer.h"
#include "storage/mem_env.h"
#include "tests/testdata.h"

namespace waste::model {
namespace {

using storage::GgmlType;

TEST(ClassifyTensorTest, ByLlamaCppNames) {
  struct Case {
    const char* name;
    TensorPart part;
    int layer;
  };
  const Case cases[] = {
      {"token_embd.weight", TensorPart::kEmbeddings, -1},
      {"output.weight", TensorPart::kOutput, -1},
      {"output_norm.weight", TensorPart::kNorms, -1},
      {"rope_freqs.weight", TensorPart::kOther, -1},
      {"blk.0.attn_norm.weight", TensorPart::kNorms, 0},
      {"blk.12.attn_q.weight", TensorPart::kAttention, 12},
      {"blk.3.attn_q.bias", TensorPart::kAttention, 3},
      {"blk.3.attn_qkv.weight", TensorPart::kAttention, 3},
      {"blk.3.attn_output.weight", TensorPart::kAttention, 3},
      {"blk.3.attn_q_norm.weight", TensorPart::kNorms, 3},
      {"blk.3.attn_k_norm.weight", TensorPart::kNorms, 3},
      {"blk.3.attn_q_a.weight", TensorPart::kAttention, 3},
      {"blk.3.attn_q_a_norm.weight", TensorPart::kAttention, 3},
      {"blk.3.attn_kv_a_mqa.weight", TensorPart::kAttention, 3},
      {"blk.3.attn_kv_a_norm.weight", TensorPart::kAttention, 3},
      {"blk.3.attn_kv_b.weight", TensorPart::kAttention, 3},
      {"blk.3.attn_k_b.weight", TensorPart::kAttention, 3},
      {"blk.3.attn_v_b.weight", TensorPart::kAttention, 3},
      {"blk.3.ffn_norm.weight", TensorPart::kNorms, 3},
      {"blk.3.ffn_gate.weight", TensorPart::kDenseFfn, 3},
      {"blk.3.ffn_down.weight", TensorPart::kDenseFfn, 3},
      {"blk.3.ffn_gate_inp.weight", TensorPart::kRouter, 3},
      {"blk.3.exp_probs_b.bias", TensorPart::kRouter, 3},
      {"blk.3.ffn_gate_exps.weight", TensorPart::kRoutedExperts, 3},
      {"blk.3.ffn_down_exps.weight", TensorPart::kRoutedExperts, 3},
      {"blk.3.ffn_up.7.weight", TensorPart::kRoutedExperts, 3},
      {"blk.3.ffn_up_shexp.weight", TensorPart::kSharedExperts, 3},
      {"blk.3.ffn_gate_inp_shexp.weight", TensorPart::kSharedExperts, 3},
      {"blk.x.attn_q.weight", TensorPart::kOther, -1},
  };
  for (const Case& c : cases) {
    TensorClass cls = ClassifyTensor(c.name);
    EXPECT_EQ(cls.part, c.part) << c.name << " -> " << TensorPartName(cls.part);
    EXPECT_EQ(cls.layer, c.layer) << c.name;
  }
}

TEST(ModelLayoutTest, Stories260K) {
  auto gguf = storage::GgufFile::Open(storage::Env::Default(),
                                      waste::testing::ModelPath("stories260K/stories260K.gguf"));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  absl::StatusOr<ModelLayout> layout = ModelLayout::FromGguf(**gguf);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->arch(), "llama");
  EXPECT_EQ(layout->tensor_count(), 48);
  ASSERT_EQ(layout->layers().size(), 5u);

  uint64_t bytes = 0;
  int64_t params = 0;
  for (const storage::TensorInfo& t : (*gguf)->tensors()) {
    bytes += t.size;
    params += t.NumElements();
  }
  EXPECT_EQ(layout->total_bytes(), bytes);
  EXPECT_EQ(layout->parts().Total(), bytes);
  EXPECT_EQ(layout->total_params(), params);
  EXPECT_EQ(layout->types().at(GgmlType::kF32).bytes, bytes);

  uint64_t in_layers = 0;
  for (const LayerLayout& layer : layout->layers()) {
    EXPECT_EQ(layer.bytes, layout->layers()[0].bytes);
    EXPECT_EQ(layer.parts.Total(), layer.bytes);
    EXPECT_GT(layer.parts[TensorPart::kAttention], 0u);
    EXPECT_GT(layer.parts[TensorPart::kDenseFfn], 0u);
    EXPECT_EQ(layer.n_expert, 0);
    in_layers += layer.bytes;
  }
  const auto& parts = layout->parts();
  EXPECT_EQ(in_layers + parts[TensorPart::kEmbeddings] + parts[TensorPart::kOutput] +
                (*gguf)->FindTensor("output_norm.weight")->size,
            bytes);
  // 512 tokens x 64 dims of f32.
  EXPECT_EQ(parts[TensorPart::kEmbeddings], 512u * 64 * 4);
  EXPECT_EQ(parts[TensorPart::kRoutedExperts], 0u);
  EXPECT_EQ(layout->expert_count(), 0);
  EXPECT_EQ(layout->expert_bytes(), 0u);
  // One row of the embeddings (f32, 64 dims), the rest whole.
  EXPECT_EQ(layout->ActiveBytesPerToken(), bytes - 512u * 64 * 4 + 64 * 4);
}

struct MoeCase {
  tools::SyntheticArch arch;
  int moe_layers;  // In the file.
  bool shared;
  bool nextn = false;  // The last MoE layer is a multi-token-prediction block.
};

class MoeLayoutTest : public ::testing::TestWithParam<MoeCase> {};

TEST_P(MoeLayoutTest, ExpertSizeTimesExpertsIsTheRoutedBytes) {
  storage::MemEnv env;
  tools::MkModelOptions o;
  o.arch = GetParam().arch;
  o.out = "/moe.gguf";
  o.dim = 256;
  o.layers = 4;
  o.heads = 4;
  o.experts = 6;
  o.experts_used = 2;
  o.expert_ffn = 128;
  o.type = GgmlType::kQ4_K;
  ASSERT_TRUE(tools::WriteSyntheticModel(o, &env).ok());
  auto gguf = storage::GgufFile::Open(&env, o.out);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  absl::StatusOr<ModelLayout> layout = ModelLayout::FromGguf(**gguf);
  ASSERT_TRUE(layout.ok()) << layout.status();

  EXPECT_EQ(layout->expert_count(), 6);
  EXPECT_EQ(layout->experts_used(), 2);
  EXPECT_EQ(layout->moe_layer_count(), GetParam().moe_layers);
  const uint64_t routed = layout->parts()[TensorPart::kRoutedExperts];
  EXPECT_GT(routed, 0u);
  EXPECT_EQ(layout->expert_bytes() * 6 * GetParam().moe_layers, routed);
  // gate + up + down of one expert: 3 x 128 rows of 256 (Q4_K: 144 B per 256).
  // down_exps rows are 128 long, which Q4_K cannot hold: Q5_0 (22 B per 32).
  EXPECT_EQ(layout->expert_bytes(), 2u * 128 * 144 + 256u * 4 * 22);
  EXPECT_EQ(layout->parts().Total(), layout->total_bytes());
  EXPECT_EQ(layout->parts()[TensorPart::kSharedExperts] > 0, GetParam().shared);
  EXPECT_GT(layout->parts()[TensorPart::kRouter], 0u);
  const storage::TensorInfo* embd = (*gguf)->FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  ASSERT_NE((*gguf)->FindTensor("output.weight"), nullptr);
  // A multi-token-prediction block is not read at all.
  const int read_moe_layers = GetParam().moe_layers - (GetParam().nextn ? 1 : 0);
  uint64_t unread = 0;
  if (GetParam().nextn) {
    const LayerLayout& last = layout->layers().back();
    unread = last.bytes - last.parts[TensorPart::kRoutedExperts];
    EXPECT_GT(unread, 0u);
  }
  EXPECT_EQ(layout->ActiveBytesPerToken(),
            layout->total_bytes() - routed - embd->size + embd->size / embd->NumRows() +
                2 * layout->expert_bytes() * read_moe_layers - unread);
  EXPECT_EQ(layout->min_expert_bytes(), layout->expert_bytes());
  for (const LayerLayout& layer : layout->layers()) {
    EXPECT_EQ(layer.parts.Total(), layer.bytes);
    if (layer.n_expert > 0) {
      EXPECT_EQ(layer.expert_bytes, layout->expert_bytes());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, MoeLayoutTest,
                         ::testing::Values(MoeCase{tools::SyntheticArch::kMixtral, 4, false},
                                           MoeCase{tools::SyntheticArch::kQwen3Moe, 4, false},
                                           MoeCase{tools::SyntheticArch::kDeepseek2, 3, true},
                                           MoeCase{tools::SyntheticArch::kGlm4Moe, 4, true, true}));

absl::StatusOr<ModelLayout> LayoutOf(uint32_t expert_count, int64_t ne2) {
  std::string bytes;
  storage::StringSink sink(&bytes);
  storage::GgufWriter writer(&sink);
  EXPECT_TRUE(writer.AddString("general.architecture", "qwen3moe").ok());
  EXPECT_TRUE(writer.AddUint32("qwen3moe.expert_count", expert_count).ok());
  EXPECT_TRUE(writer.AddTensor("blk.0.ffn_up_exps.weight", GgmlType::kF32, {32, 8, ne2}).ok());
  EXPECT_TRUE(writer.WriteHeader().ok());
  EXPECT_TRUE(
      writer.WriteTensorData("blk.0.ffn_up_exps.weight", std::string(32 * 8 * ne2 * 4, '\0')).ok());
  EXPECT_TRUE(writer.Finish().ok());
  auto gguf = storage::GgufFile::Parse(storage::testing::StringFile(bytes));
  EXPECT_TRUE(gguf.ok()) << gguf.status();
  return ModelLayout::FromGguf(**gguf);
}

TEST(ModelLayoutTest, ExpertsMustMatchTheMetadata) {
  absl::StatusOr<ModelLayout> ok = LayoutOf(3, 3);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->expert_bytes(), 32u * 8 * 4);
  absl::StatusOr<ModelLayout> bad = LayoutOf(4, 3);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("blk.0.ffn_up_exps.weight"), std::string::npos);
}

}  // namespace
}  // namespace waste::model
