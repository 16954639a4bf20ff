// Each architecture's hyperparameters as llama.cpp derives them from a
// synthetic file, where its extra tensors go, and what is refused (naming
// the key or tensor): deepseek2's MLA in both GGUF forms, gpt-oss, gemma
// 1-3 and glm4moe. (The logits themselves: reference_test.)
#include <cmath>
#include <string>

#include "daemon/model/forward.h"
#include "daemon/model/model.h"
#include "daemon/tools/test_models.h"
#include "gtest/gtest.h"

namespace waste::model {
namespace {

using storage::GgmlType;
using storage::GgufValue;
using tools::SyntheticArch;

// A file from before llama.cpp's MLA split reads as the same MLA (its
// per-head lengths from key_length/value_length, the cache the latent); one
// with half of the split form's keys is refused, naming them, and one that
// claims the split form without its tensors names the missing tensor.
TEST(FusedMlaFileTest, HyperparametersAndRefusals) {
  tools::MkModelOptions o;
  o.arch = SyntheticArch::kDeepseek2;
  o.out = ::testing::TempDir() + "/fused_mla_hparams.gguf";
  o.dim = 128;
  o.layers = 2;
  o.heads = 4;
  o.head_dim = 32;
  o.rope_dim = 16;
  o.kv_lora_rank = 64;
  o.experts = 4;
  o.expert_ffn = 64;
  o.vocab = 320;
  o.mla_fused = true;
  ASSERT_TRUE(tools::testing::WriteModel(o, {}).ok());
  auto loaded = tools::testing::LoadModel(o.out);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const HParams& hp = loaded->model->hparams();
  EXPECT_TRUE(hp.mla.fused_kv_b);
  EXPECT_EQ(hp.mla.qk_nope, 32);
  EXPECT_EQ(hp.mla.v_head, 32);
  EXPECT_EQ(hp.n_head_kv, 1);
  EXPECT_EQ(hp.head_dim, 64 + 16);
  EXPECT_TRUE(loaded->model->layers()[1].wkv_b.present);
  EXPECT_FALSE(loaded->model->layers()[1].wk_b.present);
  // Per token, 2 layers x 4 heads: the Q8_0 key rows (32 rows of 64, 68
  // bytes each) are not read; their F16 copies (64 rows of 32) are.
  const DerivedWeightBytes derived = DerivedWeightBytesPerToken(*loaded->model);
  EXPECT_EQ(derived.replaced, 2u * 4 * 32 * 68);
  EXPECT_EQ(derived.read, 2u * 4 * 64 * 32 * 2);

  ASSERT_TRUE(
      tools::testing::WriteModel(o, {{"deepseek2.attention.key_length_mla", GgufValue::Uint32(48)}})
          .ok());
  absl::Status half = tools::testing::LoadModel(o.out).status();
  EXPECT_EQ(half.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(half.message().find("value_length_mla"), std::string::npos) << half;

  ASSERT_TRUE(tools::testing::WriteModel(
                  o, {{"deepseek2.attention.key_length_mla", GgufValue::Uint32(48)},
                      {"deepseek2.attention.value_length_mla", GgufValue::Uint32(32)},
                      {"deepseek2.attention.key_length", GgufValue::Uint32(80)},
                      {"deepseek2.attention.head_count_kv", GgufValue::Uint32(1)}})
                  .ok());
  absl::Status split = tools::testing::LoadModel(o.out).status();
  EXPECT_NE(split.message().find("attn_k_b.weight' is missing"), std::string::npos) << split;
}

// gpt-oss's hyperparameters and where its extra tensors go: the window on
// the even layers only, softmax over the chosen logits, each expert's bias
// rows in that expert's chunk (its bytes: 3 slices and 3 bias rows); a
// window of 0 is refused, naming the key.
TEST(GptOssFileTest, HyperparametersTensorsAndRefusals) {
  tools::MkModelOptions o;
  o.arch = SyntheticArch::kGptOss;
  o.out = ::testing::TempDir() + "/gpt_oss_hparams.gguf";
  o.dim = 128;
  o.layers = 2;
  o.heads = 4;
  o.kv_heads = 2;
  o.head_dim = 48;
  o.experts = 4;
  o.experts_used = 2;
  o.expert_ffn = 64;
  o.vocab = 320;
  o.type = GgmlType::kMXFP4;
  ASSERT_TRUE(tools::testing::WriteModel(o, {}).ok());
  auto loaded = tools::testing::LoadModel(o.out);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Model& model = *loaded->model;
  const HParams& hp = model.hparams();
  EXPECT_EQ(hp.arch, Arch::kGptOss);
  EXPECT_EQ(hp.n_swa, 128);
  EXPECT_EQ(hp.AttentionWindow(0), 128);
  EXPECT_EQ(hp.AttentionWindow(1), 0);
  EXPECT_EQ(hp.moe.gating, ExpertGating::kSoftmaxChosen);
  EXPECT_TRUE(hp.moe.swiglu_oai);
  EXPECT_EQ(hp.moe.n_ff_exp, 64);
  EXPECT_EQ(hp.rope.mode, kernels::ops::RopeMode::kNeox);
  const LayerTensors& layer = model.layers()[1];
  EXPECT_TRUE(layer.sinks.present && layer.bo.present && layer.router_bias.present);
  EXPECT_EQ(layer.sinks.place.chunk, layer.attn_chunk);
  EXPECT_EQ(layer.router_bias.place.chunk, layer.ffn_chunk);
  const uint64_t slices = 2 * 64 * layer.gate_exps.row_bytes + 128 * layer.down_exps.row_bytes;
  EXPECT_EQ(model.chunks()[layer.experts[3].chunk].tensor_bytes, slices + (2 * 64 + 128) * 4);

  ASSERT_TRUE(
      tools::testing::WriteModel(o, {{"gpt-oss.attention.sliding_window", GgufValue::Uint32(0)}})
          .ok());
  absl::Status zero = tools::testing::LoadModel(o.out).status();
  EXPECT_EQ(zero.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(zero.message().find("sliding_window"), std::string::npos) << zero;
}

// Gemma's hyperparameters as llama.cpp derives them: gemma3's window on five
// layers in six, whose RoPE is base 10000 unscaled while the sixth keeps
// the file's base and linear factor; the query scale (27B: n_embd / n_head,
// told by the layer count); the head tied to the embeddings; the post-norms
// in their blocks' chunks; gemma2's caps and window from the file.
TEST(GemmaFileTest, HyperparametersAndTensors) {
  tools::MkModelOptions o;
  o.arch = SyntheticArch::kGemma3;
  o.out = ::testing::TempDir() + "/gemma3_hparams.gguf";
  o.dim = 128;
  o.layers = 7;
  o.heads = 4;
  o.kv_heads = 1;
  o.head_dim = 64;
  o.vocab = 320;
  o.sliding_window = 512;
  ASSERT_TRUE(tools::testing::WriteModel(o, {}).ok());
  auto loaded = tools::testing::LoadModel(o.out);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Model& model = *loaded->model;
  const HParams& hp = model.hparams();
  EXPECT_EQ(hp.arch, Arch::kGemma3);
  EXPECT_FLOAT_EQ(hp.embd_scale, std::sqrt(128.0f));
  EXPECT_FLOAT_EQ(hp.attn_scale, 1 / 8.0f);  // 1/sqrt(head_dim), not 1/sqrt(32).
  EXPECT_EQ(hp.attn_softcap, 0);
  EXPECT_EQ(hp.final_softcap, 0);
  EXPECT_TRUE(hp.ffn_gelu && hp.post_norms);
  EXPECT_EQ(hp.rope.mode, kernels::ops::RopeMode::kNeox);
  for (int64_t l = 0; l < 7; ++l) {
    const bool global = l == 5;
    EXPECT_EQ(hp.AttentionWindow(l), global ? 0 : 512) << l;
    EXPECT_FLOAT_EQ(hp.RopeOf(l).freq_base, global ? 1e6f : 1e4f) << l;
    EXPECT_FLOAT_EQ(hp.RopeOf(l).freq_scale, global ? 0.125f : 1.0f) << l;
  }
  const GlobalTensors& g = model.globals();
  EXPECT_EQ(g.output.place.slot_offset, g.token_embd.place.slot_offset);  // Tied.
  const LayerTensors& layer = model.layers()[2];
  EXPECT_TRUE(layer.q_norm.present && layer.k_norm.present);
  EXPECT_EQ(layer.attn_post_norm.place.chunk, layer.attn_chunk);
  EXPECT_EQ(layer.ffn_post_norm.place.chunk, layer.ffn_chunk);

  // gemma3 27B (62 layers): the query scale from n_embd / n_head.
  o.layers = 62;
  o.dim = 64;
  o.heads = 2;
  ASSERT_TRUE(tools::testing::WriteModel(o, {}).ok());
  auto big = tools::testing::LoadModel(o.out);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_FLOAT_EQ(big->model->hparams().attn_scale, 1 / std::sqrt(32.0f));

  o.arch = SyntheticArch::kGemma2;
  o.layers = 2;
  o.sliding_window = 0;
  ASSERT_TRUE(tools::testing::WriteModel(o, {}).ok());
  auto gemma2 = tools::testing::LoadModel(o.out);
  ASSERT_TRUE(gemma2.ok()) << gemma2.status();
  const HParams& hp2 = gemma2->model->hparams();
  EXPECT_EQ(hp2.AttentionWindow(0), 128);
  EXPECT_EQ(hp2.AttentionWindow(1), 0);
  EXPECT_FALSE(hp2.has_rope_swa);
  EXPECT_FLOAT_EQ(hp2.attn_softcap, 5.0f);
  EXPECT_FLOAT_EQ(hp2.final_softcap, 3.0f);
  EXPECT_FALSE(gemma2->model->layers()[0].q_norm.present);
}

// glm4moe's hyperparameters and blocks: the multi-token-prediction block is
// in the file but not in the model (none of its bytes in any chunk), RoPE on
// half of each head (NeoX), DeepSeek-V3's routing without groups, the post
// attention norm before every FFN, dense and MoE; a nextn count that leaves
// no block and multi-axis RoPE (GLM-4.5V) are refused.
TEST(Glm4MoeFileTest, HyperparametersBlocksAndRefusals) {
  tools::MkModelOptions o;
  o.arch = SyntheticArch::kGlm4Moe;
  o.out = ::testing::TempDir() + "/glm4moe_hparams.gguf";
  o.dim = 128;
  o.layers = 3;
  o.heads = 4;
  o.kv_heads = 2;
  o.head_dim = 64;
  o.experts = 4;
  o.experts_used = 2;
  o.expert_ffn = 64;
  o.vocab = 320;
  ASSERT_TRUE(tools::testing::WriteModel(o, {}).ok());
  auto loaded = tools::testing::LoadModel(o.out);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Model& model = *loaded->model;
  const HParams& hp = model.hparams();
  EXPECT_EQ(hp.arch, Arch::kGlm4Moe);
  EXPECT_EQ(hp.n_layer, 3);
  EXPECT_EQ(model.layers().size(), 3u);
  EXPECT_EQ(hp.rope.mode, kernels::ops::RopeMode::kNeox);
  EXPECT_EQ(hp.rope.n_rot, 32);
  EXPECT_EQ(hp.moe.gating, ExpertGating::kSigmoid);
  EXPECT_TRUE(hp.moe.norm_weights);
  EXPECT_EQ(hp.moe.weights_scale, 2.5f);
  EXPECT_EQ(hp.moe.n_ff_shexp, 64);
  EXPECT_EQ(hp.moe.n_layer_dense_lead, 1);
  EXPECT_EQ(hp.moe.n_group, 0);
  EXPECT_FALSE(hp.IsMoeLayer(0));
  EXPECT_TRUE(hp.IsMoeLayer(1));
  for (const LayerTensors& layer : model.layers()) {
    EXPECT_TRUE(layer.ffn_norm.present && layer.bq.present && layer.q_norm.present);
  }
  EXPECT_TRUE(model.layers()[0].gate.present);
  EXPECT_TRUE(model.layers()[1].expert_bias.present && model.layers()[1].gate_shexp.present);
  for (const memory::ChunkSpec& chunk : model.chunks()) {
    EXPECT_EQ(chunk.name.find("blk.3."), std::string::npos) << chunk.name;
  }

  struct Refusal {
    tools::testing::MetadataOverrides overrides;
    const char* names;
  };
  for (const Refusal& r :
       {Refusal{{{"glm4moe.nextn_predict_layers", GgufValue::Uint32(4)}}, "nextn_predict_layers"},
        Refusal{{{"glm4moe.rope.dimension_sections",
                  GgufValue::Array(storage::GgufValueType::kInt32,
                                   {GgufValue::Int32(8), GgufValue::Int32(12), GgufValue::Int32(12),
                                    GgufValue::Int32(0)})}},
                "rope.dimension_sections"}}) {
    ASSERT_TRUE(tools::testing::WriteModel(o, r.overrides).ok());
    absl::Status refused = tools::testing::LoadModel(o.out).status();
    EXPECT_FALSE(refused.ok());
    EXPECT_NE(refused.message().find(r.names), std::string::npos) << refused;
  }
}

}  // namespace
}  // namespace waste::model
