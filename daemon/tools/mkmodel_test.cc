#include "daemon/tools/mkmodel.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "daemon/kernels/dequantize.h"
#include "daemon/text/tokenizer.h"
#include "daemon/text/vocab_gguf.h"
#include "daemon/tools/synthetic_model.h"
#include "daemon/tools/synthetic_tokenizer.h"
#include "gtest/gtest.h"
#include "storage/gguf.h"
#include "storage/mem_env.h"
#include "tests/testdata.h"

namespace waste::tools {
namespace {

using storage::GgmlType;
using storage::GgufFile;

MkModelOptions Small(SyntheticArch arch, GgmlType type = GgmlType::kQ8_0) {
  MkModelOptions o;
  o.arch = arch;
  o.out = "/model.gguf";
  o.dim = 256;
  o.layers = 3;
  o.heads = 4;
  o.kv_heads = 2;
  o.ffn = 512;
  o.ctx = 512;
  o.type = type;
  o.threads = 2;
  if (arch == SyntheticArch::kMixtral || arch == SyntheticArch::kQwen3Moe ||
      arch == SyntheticArch::kDeepseek2) {
    o.experts = 4;
    o.experts_used = 2;
    o.expert_ffn = 256;
  }
  return o;
}

struct Written {
  std::unique_ptr<storage::MemEnv> env = std::make_unique<storage::MemEnv>();
  std::unique_ptr<GgufFile> gguf;
  std::string bytes;
};

Written Write(const MkModelOptions& options) {
  Written w;
  absl::StatusOr<MkModelResult> result = WriteSyntheticModel(options, w.env.get());
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return w;
  auto gguf = GgufFile::Open(w.env.get(), options.out);
  EXPECT_TRUE(gguf.ok()) << gguf.status();
  if (gguf.ok()) w.gguf = std::move(*gguf);
  EXPECT_FALSE(w.env->FileExists(options.out + ".mkmodel-tmp"));
  auto file = w.env->NewRandomAccessFile(options.out);
  EXPECT_TRUE(file.ok());
  w.bytes.resize((*file)->Size());
  EXPECT_TRUE((*file)->Read(0, w.bytes.size(), w.bytes.data()).ok());
  EXPECT_EQ(result->file_bytes, w.bytes.size());
  EXPECT_EQ(result->tensors, static_cast<int64_t>(w.gguf->tensors().size()));
  return w;
}

std::vector<int64_t> Shape(const GgufFile& gguf, const std::string& name) {
  const storage::TensorInfo* t = gguf.FindTensor(name);
  EXPECT_NE(t, nullptr) << name;
  return t ? t->shape : std::vector<int64_t>{};
}

uint64_t U(const GgufFile& gguf, const std::string& key) {
  auto v = gguf.GetUint(key);
  EXPECT_TRUE(v.ok()) << key << ": " << v.status();
  return v.ok() ? *v : 0;
}

struct ArchCase {
  SyntheticArch arch;
  const char* gguf_arch;
  int per_layer;  // Tensors per layer (deepseek2: per MoE layer).
};

class MkModelArchTest : public ::testing::TestWithParam<ArchCase> {};

TEST_P(MkModelArchTest, RoundTripsThroughTheReader) {
  const ArchCase& c = GetParam();
  const MkModelOptions o = Small(c.arch);
  Written w = Write(o);
  ASSERT_NE(w.gguf, nullptr);
  const GgufFile& g = *w.gguf;
  const std::string a = c.gguf_arch;
  EXPECT_EQ(*g.GetString("general.architecture"), a);
  EXPECT_EQ(U(g, a + ".block_count"), 3u);
  EXPECT_EQ(U(g, a + ".embedding_length"), 256u);
  EXPECT_EQ(U(g, a + ".context_length"), 512u);
  EXPECT_EQ(U(g, a + ".attention.head_count"), 4u);
  EXPECT_TRUE(g.GetFloat(a + ".attention.layer_norm_rms_epsilon").ok());
  EXPECT_TRUE(g.GetFloat(a + ".rope.freq_base").ok());
  const int64_t vocab = MinByteLevelVocab();
  EXPECT_EQ(g.GetStringArray("tokenizer.ggml.tokens")->size(), static_cast<size_t>(vocab));
  EXPECT_EQ(*g.GetString("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(Shape(g, "token_embd.weight"), (std::vector<int64_t>{256, vocab}));
  EXPECT_EQ(Shape(g, "output.weight"), (std::vector<int64_t>{256, vocab}));
  EXPECT_EQ(Shape(g, "output_norm.weight"), (std::vector<int64_t>{256}));

  // Every tensor's data lies inside the file, in order, aligned.
  uint64_t end = g.data_offset();
  for (const storage::TensorInfo& t : g.tensors()) {
    EXPECT_EQ(t.offset % g.alignment(), 0u) << t.name;
    EXPECT_GE(t.offset, end) << t.name;
    end = t.offset + t.size;
    if (t.shape.size() == 1) {
      EXPECT_EQ(t.type, GgmlType::kF32) << t.name;
    }
  }
  EXPECT_LE(end, g.file_size());

  if (c.arch == SyntheticArch::kDeepseek2) {
    // 1 dense layer (13 tensors) + 2 MoE layers.
    EXPECT_EQ(g.tensors().size(), 3u + 13 + 2 * c.per_layer);
    EXPECT_EQ(U(g, a + ".leading_dense_block_count"), 1u);
    EXPECT_EQ(U(g, a + ".attention.kv_lora_rank"), 64u);
    EXPECT_EQ(U(g, a + ".attention.q_lora_rank"), 128u);
    EXPECT_EQ(U(g, a + ".attention.head_count_kv"), 1u);
    EXPECT_EQ(U(g, a + ".rope.dimension_count"), 32u);  // head_dim 64 / 2.
    EXPECT_EQ(U(g, a + ".attention.key_length_mla"), 96u);
    EXPECT_EQ(U(g, a + ".attention.value_length_mla"), 64u);
    EXPECT_EQ(U(g, a + ".expert_shared_count"), 1u);
    EXPECT_EQ(U(g, a + ".expert_gating_func"), 2u);
    EXPECT_TRUE(g.GetBool(a + ".expert_weights_norm").ok());
    EXPECT_TRUE(g.GetFloat(a + ".expert_weights_scale").ok());
    EXPECT_EQ(Shape(g, "blk.0.ffn_gate.weight"), (std::vector<int64_t>{256, 512}));
    EXPECT_EQ(Shape(g, "blk.1.attn_q_a.weight"), (std::vector<int64_t>{256, 128}));
    EXPECT_EQ(Shape(g, "blk.1.attn_q_a_norm.weight"), (std::vector<int64_t>{128}));
    EXPECT_EQ(Shape(g, "blk.1.attn_q_b.weight"), (std::vector<int64_t>{128, 4 * 96}));
    EXPECT_EQ(Shape(g, "blk.1.attn_kv_a_mqa.weight"), (std::vector<int64_t>{256, 64 + 32}));
    EXPECT_EQ(Shape(g, "blk.1.attn_kv_a_norm.weight"), (std::vector<int64_t>{64}));
    EXPECT_EQ(Shape(g, "blk.1.attn_k_b.weight"), (std::vector<int64_t>{64, 64, 4}));
    EXPECT_EQ(Shape(g, "blk.1.attn_v_b.weight"), (std::vector<int64_t>{64, 64, 4}));
    EXPECT_EQ(Shape(g, "blk.1.attn_output.weight"), (std::vector<int64_t>{4 * 64, 256}));
    EXPECT_EQ(Shape(g, "blk.1.exp_probs_b.bias"), (std::vector<int64_t>{4}));
    EXPECT_EQ(Shape(g, "blk.2.ffn_gate_shexp.weight"), (std::vector<int64_t>{256, 256}));
    EXPECT_EQ(Shape(g, "blk.2.ffn_down_shexp.weight"), (std::vector<int64_t>{256, 256}));
  } else {
    EXPECT_EQ(g.tensors().size(), 3u + 3 * c.per_layer);
    EXPECT_EQ(U(g, a + ".attention.head_count_kv"), 2u);
    EXPECT_EQ(U(g, a + ".rope.dimension_count"), 64u);
    EXPECT_EQ(Shape(g, "blk.2.attn_q.weight"), (std::vector<int64_t>{256, 256}));
    EXPECT_EQ(Shape(g, "blk.2.attn_k.weight"), (std::vector<int64_t>{256, 128}));
    EXPECT_EQ(Shape(g, "blk.2.attn_v.weight"), (std::vector<int64_t>{256, 128}));
    EXPECT_EQ(Shape(g, "blk.2.attn_output.weight"), (std::vector<int64_t>{256, 256}));
    EXPECT_EQ(Shape(g, "blk.2.attn_norm.weight"), (std::vector<int64_t>{256}));
    EXPECT_EQ(Shape(g, "blk.2.ffn_norm.weight"), (std::vector<int64_t>{256}));
  }
  if (c.arch == SyntheticArch::kQwen2) {
    EXPECT_EQ(Shape(g, "blk.0.attn_q.bias"), (std::vector<int64_t>{256}));
    EXPECT_EQ(Shape(g, "blk.0.attn_k.bias"), (std::vector<int64_t>{128}));
    EXPECT_EQ(Shape(g, "blk.0.attn_v.bias"), (std::vector<int64_t>{128}));
  }
  if (c.arch == SyntheticArch::kQwen3 || c.arch == SyntheticArch::kQwen3Moe) {
    EXPECT_EQ(Shape(g, "blk.0.attn_q_norm.weight"), (std::vector<int64_t>{64}));
    EXPECT_EQ(Shape(g, "blk.0.attn_k_norm.weight"), (std::vector<int64_t>{64}));
    EXPECT_EQ(U(g, a + ".attention.key_length"), 64u);
  }
  const bool moe = c.arch == SyntheticArch::kMixtral || c.arch == SyntheticArch::kQwen3Moe ||
                   c.arch == SyntheticArch::kDeepseek2;
  if (moe) {
    EXPECT_EQ(U(g, a + ".expert_count"), 4u);
    EXPECT_EQ(U(g, a + ".expert_used_count"), 2u);
    EXPECT_EQ(Shape(g, "blk.2.ffn_gate_inp.weight"), (std::vector<int64_t>{256, 4}));
    EXPECT_EQ(g.FindTensor("blk.2.ffn_gate_inp.weight")->type, GgmlType::kF32);
    EXPECT_EQ(Shape(g, "blk.2.ffn_gate_exps.weight"), (std::vector<int64_t>{256, 256, 4}));
    EXPECT_EQ(Shape(g, "blk.2.ffn_up_exps.weight"), (std::vector<int64_t>{256, 256, 4}));
    EXPECT_EQ(Shape(g, "blk.2.ffn_down_exps.weight"), (std::vector<int64_t>{256, 256, 4}));
    EXPECT_EQ(g.FindTensor("blk.2.ffn_gate.weight"), nullptr);
  } else {
    EXPECT_EQ(Shape(g, "blk.1.ffn_gate.weight"), (std::vector<int64_t>{256, 512}));
    EXPECT_EQ(Shape(g, "blk.1.ffn_up.weight"), (std::vector<int64_t>{256, 512}));
    EXPECT_EQ(Shape(g, "blk.1.ffn_down.weight"), (std::vector<int64_t>{512, 256}));
  }
  if (c.arch == SyntheticArch::kMixtral) {
    // llama.cpp's llama arch sizes its experts by feed_forward_length.
    EXPECT_EQ(U(g, "llama.feed_forward_length"), 256u);
  }
  if (c.arch == SyntheticArch::kQwen3Moe) {
    EXPECT_EQ(U(g, a + ".expert_feed_forward_length"), 256u);
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, MkModelArchTest,
                         ::testing::Values(ArchCase{SyntheticArch::kLlama, "llama", 9},
                                           ArchCase{SyntheticArch::kQwen2, "qwen2", 12},
                                           ArchCase{SyntheticArch::kQwen3, "qwen3", 11},
                                           ArchCase{SyntheticArch::kMixtral, "llama", 10},
                                           ArchCase{SyntheticArch::kQwen3Moe, "qwen3moe", 12},
                                           ArchCase{SyntheticArch::kDeepseek2, "deepseek2", 18}),
                         [](const auto& info) {
                           return std::string(SyntheticArchFlagName(info.param.arch));
                         });

class MkModelTypeTest : public ::testing::TestWithParam<GgmlType> {};

// Matrices come in the requested type and decode to values of the intended
// scale: ~normal(0, 1/sqrt(ne0)).
TEST_P(MkModelTypeTest, MatricesHaveTheTypeAndSaneValues) {
  MkModelOptions o = Small(SyntheticArch::kLlama, GetParam());
  Written w = Write(o);
  ASSERT_NE(w.gguf, nullptr);
  const storage::TensorInfo* q = w.gguf->FindTensor("blk.1.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, GetParam());
  EXPECT_EQ(w.gguf->FindTensor("blk.1.attn_norm.weight")->type, GgmlType::kF32);
  std::vector<float> row(256);
  double sum = 0, sum2 = 0;
  const uint64_t row_bytes = *storage::GgmlRowSize(q->type, 256);
  for (int r = 0; r < 16; ++r) {
    kernels::DequantizeRow(static_cast<kernels::WeightType>(q->type),
                           w.bytes.data() + q->offset + r * row_bytes, row.data(), 256);
    for (float v : row) {
      sum += v;
      sum2 += v * v;
    }
  }
  const double n = 16 * 256;
  const double std = std::sqrt(sum2 / n - (sum / n) * (sum / n));
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(std, 1.0 / 16, 0.015);  // 1 / sqrt(256), give or take quantization.

  // Norms are ones.
  const storage::TensorInfo* norm = w.gguf->FindTensor("blk.1.attn_norm.weight");
  std::vector<float> ones(256);
  std::memcpy(ones.data(), w.bytes.data() + norm->offset, 256 * sizeof(float));
  for (float v : ones) ASSERT_EQ(v, 1.0f);
}

INSTANTIATE_TEST_SUITE_P(
    Types, MkModelTypeTest,
    ::testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                      GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                      GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kQ2_K,
                      GgmlType::kQ3_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS, GgmlType::kIQ3_S,
                      GgmlType::kIQ3_XXS, GgmlType::kIQ2_S, GgmlType::kIQ2_XS, GgmlType::kIQ2_XXS,
                      GgmlType::kIQ1_M, GgmlType::kIQ1_S, GgmlType::kMXFP4),
    [](const auto& info) { return std::string(storage::GgmlTypeName(info.param)); });

TEST(MkModelTest, FallsBackWhereRowsAreNotWholeBlocks) {
  EXPECT_EQ(MatrixType(GgmlType::kQ4_K, 512), GgmlType::kQ4_K);
  EXPECT_EQ(MatrixType(GgmlType::kQ4_K, 96), GgmlType::kQ5_0);
  EXPECT_EQ(MatrixType(GgmlType::kQ5_K, 96), GgmlType::kQ5_1);
  EXPECT_EQ(MatrixType(GgmlType::kQ6_K, 96), GgmlType::kQ8_0);
  EXPECT_EQ(MatrixType(GgmlType::kQ8_0, 48), GgmlType::kF16);
  EXPECT_EQ(MatrixType(GgmlType::kQ4_K, 40), GgmlType::kF16);
  EXPECT_EQ(MatrixType(GgmlType::kF32, 7), GgmlType::kF32);

  // deepseek2's attn_k_b rows are qk_nope (64) long: Q4_K falls back there.
  Written w = Write(Small(SyntheticArch::kDeepseek2, GgmlType::kQ4_K));
  ASSERT_NE(w.gguf, nullptr);
  EXPECT_EQ(w.gguf->FindTensor("blk.1.attn_k_b.weight")->type, GgmlType::kQ5_0);
  EXPECT_EQ(w.gguf->FindTensor("blk.1.attn_q_a.weight")->type, GgmlType::kQ4_K);
}

// Every key llama.cpp's loader requires of a deepseek2 file (llama_model::
// load_hparams: the general ones, then deepseek2's without a `false`), for
// the shapes that used to miss some: no q LoRA, and a context within the
// original 4096 (no YaRN).
TEST(MkModelTest, Deepseek2HasEveryKeyLlamaCppRequires) {
  for (int64_t q_lora : {int64_t{0}, int64_t{-1}}) {
    for (int64_t ctx : {int64_t{512}, int64_t{8192}}) {
      SCOPED_TRACE(::testing::Message() << "q_lora_rank " << q_lora << " ctx " << ctx);
      MkModelOptions o = Small(SyntheticArch::kDeepseek2);
      o.q_lora_rank = q_lora;
      o.ctx = ctx;
      Written w = Write(o);
      ASSERT_NE(w.gguf, nullptr);
      const GgufFile& g = *w.gguf;
      for (const char* key : {"general.architecture",
                              "deepseek2.context_length",
                              "deepseek2.embedding_length",
                              "deepseek2.block_count",
                              "deepseek2.attention.layer_norm_rms_epsilon",
                              "deepseek2.leading_dense_block_count",
                              "deepseek2.attention.q_lora_rank",
                              "deepseek2.attention.kv_lora_rank",
                              "deepseek2.expert_feed_forward_length",
                              "deepseek2.expert_shared_count",
                              "deepseek2.expert_weights_scale",
                              "deepseek2.rope.scaling.yarn_log_multiplier",
                              "deepseek2.expert_count",
                              "deepseek2.expert_used_count",
                              "deepseek2.feed_forward_length",
                              "deepseek2.attention.head_count",
                              "deepseek2.attention.head_count_kv",
                              "deepseek2.attention.key_length",
                              "deepseek2.attention.value_length",
                              "deepseek2.attention.key_length_mla",
                              "deepseek2.attention.value_length_mla",
                              "deepseek2.rope.dimension_count",
                              "deepseek2.rope.freq_base",
                              "deepseek2.expert_gating_func",
                              "deepseek2.expert_weights_norm",
                              "tokenizer.ggml.model",
                              "tokenizer.ggml.tokens"}) {
        EXPECT_TRUE(g.Has(key)) << key;
      }
      EXPECT_FLOAT_EQ(*g.GetFloat("deepseek2.rope.scaling.yarn_log_multiplier"), 0.1f);
      EXPECT_EQ(*g.GetUint("deepseek2.attention.q_lora_rank"), q_lora == 0 ? 0u : 128u);
      EXPECT_EQ(g.Has("deepseek2.rope.scaling.type"), ctx > 4096);
      EXPECT_EQ(g.FindTensor("blk.1.attn_q.weight") != nullptr, q_lora == 0);
    }
  }
}

// --mla-fused: MLA as converters wrote it before llama.cpp's split (which
// llama.cpp of early 2025 loads, and which reference_test and
// streaming_moe_test run): per-head key/value lengths, a KV head per head,
// one attn_kv_b of each head's key rows then its value rows.
TEST(MkModelTest, Deepseek2FusedIsTheFormBeforeTheSplit) {
  MkModelOptions o = Small(SyntheticArch::kDeepseek2);
  o.mla_fused = true;
  Written w = Write(o);
  ASSERT_NE(w.gguf, nullptr);
  const GgufFile& g = *w.gguf;
  // dim 256 / 4 heads: qk_nope = v = 64, rope 32, kv_lora_rank 64.
  EXPECT_EQ(*g.GetUint("deepseek2.attention.head_count_kv"), 4u);
  EXPECT_EQ(*g.GetUint("deepseek2.attention.key_length"), 96u);
  EXPECT_EQ(*g.GetUint("deepseek2.attention.value_length"), 64u);
  EXPECT_FALSE(g.Has("deepseek2.attention.key_length_mla"));
  EXPECT_FALSE(g.Has("deepseek2.attention.value_length_mla"));
  const storage::TensorInfo* kv_b = g.FindTensor("blk.1.attn_kv_b.weight");
  ASSERT_NE(kv_b, nullptr);
  EXPECT_EQ(kv_b->shape, (std::vector<int64_t>{64, 4 * (64 + 64)}));
  EXPECT_EQ(g.FindTensor("blk.1.attn_k_b.weight"), nullptr);
  EXPECT_EQ(g.FindTensor("blk.1.attn_v_b.weight"), nullptr);
}

TEST(MkModelTest, DeterministicForASeedWhateverTheThreads) {
  MkModelOptions o = Small(SyntheticArch::kQwen3Moe, GgmlType::kQ4_K);
  o.threads = 1;
  Written a = Write(o);
  o.threads = 3;
  Written b = Write(o);
  EXPECT_EQ(a.bytes, b.bytes);
  o.seed = 2;
  Written c = Write(o);
  ASSERT_EQ(a.bytes.size(), c.bytes.size());
  EXPECT_NE(a.bytes, c.bytes);
}

TEST(MkModelTest, CopiesTheTokenizerFromAnotherFile) {
  storage::MemEnv env;
  const std::string stories = waste::testing::ModelPath("stories260K/stories260K.gguf");
  absl::StatusOr<TokenizerMetadata> tok = CopyTokenizer(storage::Env::Default(), stories);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(tok->vocab, 512);

  MkModelOptions o = Small(SyntheticArch::kLlama);
  o.tokenizer_from = stories;
  // WriteSyntheticModel reads the tokenizer through the same Env as it
  // writes; give the MemEnv a copy of the fixture.
  auto fixture = storage::ReadFileToString(storage::Env::Default(), stories);
  ASSERT_TRUE(fixture.ok());
  env.SetFile(stories, *fixture);
  ASSERT_TRUE(WriteSyntheticModel(o, &env).ok());
  auto gguf = GgufFile::Open(&env, o.out);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  EXPECT_EQ(*(*gguf)->GetString("tokenizer.ggml.model"), "llama");
  EXPECT_EQ((*gguf)->GetStringArray("tokenizer.ggml.tokens")->size(), 512u);
  EXPECT_EQ((*gguf)->FindTensor("token_embd.weight")->shape[1], 512);

  EXPECT_FALSE((*gguf)->GetString("tokenizer.chat_template").ok());  // stories260K has none.
  // --chat-template: the model's own, replacing any copied.
  o.chat_template = "{{ '<|im_start|>' }}";
  ASSERT_TRUE(WriteSyntheticModel(o, &env).ok());
  gguf = GgufFile::Open(&env, o.out);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  EXPECT_EQ(*(*gguf)->GetString("tokenizer.chat_template"), o.chat_template);

  o.vocab = 1000;
  absl::StatusOr<MkModelResult> mismatch = WriteSyntheticModel(o, &env);
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("--vocab"), std::string::npos);
}

TEST(MkModelTest, PadsTheBuiltInTokenizerToVocab) {
  MkModelOptions o = Small(SyntheticArch::kLlama);
  o.vocab = 1024;
  Written w = Write(o);
  ASSERT_NE(w.gguf, nullptr);
  auto tokens = w.gguf->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens->size(), 1024u);
  EXPECT_EQ((*tokens)[256], "\xC4\xA0t");  // The first merge: "Ġt".
  EXPECT_EQ(w.gguf->GetStringArray("tokenizer.ggml.merges")->at(0), "\xC4\xA0 t");
  EXPECT_EQ(*w.gguf->GetUint("tokenizer.ggml.eos_token_id"),
            *w.gguf->GetUint("tokenizer.ggml.bos_token_id") + 1);
  EXPECT_EQ(w.gguf->FindTensor("output.weight")->shape[1], 1024);

  o.vocab = 100;
  EXPECT_EQ(WriteSyntheticModel(o, w.env.get()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The built-in vocabulary is one the engine's tokenizer runs: text survives
// encode + decode, the merges apply and BOS is added.
TEST(MkModelTest, BuiltInTokenizerRoundTripsThroughTheEngineTokenizer) {
  Written w = Write(Small(SyntheticArch::kLlama));
  ASSERT_NE(w.gguf, nullptr);
  absl::StatusOr<text::Vocab> vocab = text::VocabFromGguf(*w.gguf);
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  auto tokenizer = text::Tokenizer::Create(*std::move(vocab));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::string input = "the cat is in the hat, and it was on the mat!\n\xC3\xA9t\xC3\xA9 42";
  std::vector<text::TokenId> ids = (*tokenizer)->Encode(input, /*add_special=*/true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], (*tokenizer)->bos());
  EXPECT_LT(ids.size(), input.size());  // Merges joined some bytes.
  EXPECT_EQ((*tokenizer)->Decode(absl::MakeConstSpan(ids).subspan(1)), input);
}

TEST(MkModelTest, RefusesInconsistentShapes) {
  storage::MemEnv env;
  MkModelOptions o = Small(SyntheticArch::kMixtral);
  o.experts_used = 9;
  EXPECT_EQ(WriteSyntheticModel(o, &env).status().code(), absl::StatusCode::kInvalidArgument);
  o = Small(SyntheticArch::kLlama);
  o.kv_heads = 3;
  EXPECT_EQ(WriteSyntheticModel(o, &env).status().code(), absl::StatusCode::kInvalidArgument);
  o = Small(SyntheticArch::kLlama);
  o.experts = 8;
  EXPECT_EQ(WriteSyntheticModel(o, &env).status().code(), absl::StatusCode::kInvalidArgument);
  o = Small(SyntheticArch::kLlama);
  o.mla_fused = true;
  EXPECT_EQ(WriteSyntheticModel(o, &env).status().code(), absl::StatusCode::kInvalidArgument);
  o = Small(SyntheticArch::kLlama);
  o.dim = 100;
  o.heads = 3;
  EXPECT_EQ(WriteSyntheticModel(o, &env).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(env.FileExists(o.out));
}

TEST(MkModelTest, ParsesFlags) {
  auto o = ParseMkModelArgs({"--arch", "deepseek2", "--out", "x.gguf", "--dim", "512", "--type",
                             "q4_k", "--experts", "16", "--kv-lora-rank", "128", "--seed", "7"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->arch, SyntheticArch::kDeepseek2);
  EXPECT_EQ(o->dim, 512);
  EXPECT_EQ(o->type, GgmlType::kQ4_K);
  EXPECT_EQ(o->experts, 16);
  EXPECT_EQ(o->kv_lora_rank, 128);
  EXPECT_EQ(o->seed, 7u);
  EXPECT_FALSE(o->mla_fused);
  o = ParseMkModelArgs({"--arch", "deepseek2", "--out", "x.gguf", "--mla-fused"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->mla_fused);
  EXPECT_FALSE(ParseMkModelArgs({"--arch", "gpt5", "--out", "x"}).ok());
  EXPECT_FALSE(ParseMkModelArgs({"--dim", "4"}).ok());  // No --out.
  EXPECT_FALSE(ParseMkModelArgs({"--out", "x", "--type", "tq1_0"}).ok());
  EXPECT_FALSE(ParseMkModelArgs({"--out", "x", "--layers", "-1"}).ok());
  EXPECT_FALSE(ParseMkModelArgs({"--out", "x", "--bogus", "1"}).ok());
  const std::string template_file = ::testing::TempDir() + "/template.jinja";
  std::ofstream(template_file) << "{{ messages }}";
  o = ParseMkModelArgs({"--out", "x", "--chat-template", template_file});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->chat_template, "{{ messages }}");
  absl::StatusOr<MkModelOptions> missing =
      ParseMkModelArgs({"--out", "x", "--chat-template", template_file + ".missing"});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find(".missing"), std::string::npos);
}

}  // namespace
}  // namespace waste::tools
