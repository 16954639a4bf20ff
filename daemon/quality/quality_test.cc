// quantize and perplexity on the real stories260K model (F32, n_embd 64,
// n_ff 172): quantized copies keep the golden greedy tokens (Q8_0) and a
// perplexity close to F32's (Q4_0); bad input is refused with clear errors.
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "daemon/cache/resident_store.h"
#include "daemon/kernels/dequantize.h"
#include "daemon/model/forward.h"
#include "daemon/model/model.h"
#include "daemon/quality/perplexity.h"
#include "daemon/quality/quantize_model.h"
#include "daemon/tools/synthetic_model.h"
#include "gtest/gtest.h"
#include "storage/env.h"
#include "storage/fault_env.h"
#include "storage/gguf.h"
#include "storage/mem_env.h"
#include "tests/testdata.h"

namespace waste::quality {
namespace {

using storage::GgmlType;

// TinyStories-like text the model has not generated itself.
constexpr char kStory[] =
    "Once upon a time, there was a little boy named Tim. Tim had a big red ball. He liked to "
    "play with his ball in the park every day. One day, Tim saw a small dog near the tree. The "
    "dog was sad because it was lost. Tim wanted to help the dog find its home.\n"
    "Tim said, \"Do not be sad, little dog. I will help you.\" The dog wagged its tail and "
    "followed Tim. They walked and walked until they saw a big house with a blue door. A girl "
    "named Sue came out of the house. She was very happy to see the dog. \"Thank you, Tim!\" "
    "she said. \"I looked for my dog all day.\"\n"
    "Tim smiled and gave the dog a hug. Sue asked Tim to play with them. They played with the "
    "ball and ran in the sun. The dog barked and jumped. Tim, Sue and the dog became best "
    "friends. From that day on, they played together in the park. They were all very happy.\n"
    "The next day, Tim went to the park again. He saw Sue and the dog by the big tree. The sun "
    "was warm and the sky was blue. Tim and Sue ate cookies and drank milk. Then they went home "
    "to their moms. Tim said, \"I had a fun day.\" His mom gave him a big hug and a kiss.\n";

class QualityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::TempDir());
    f32_ = new std::string(testing::ModelPath("stories260K/stories260K.gguf"));
    story_ = new std::string(*dir_ + "/story.txt");
    std::ofstream(*story_) << kStory;
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete f32_;
    delete story_;
  }

  // Quantizes stories260K to `type` (once per type for the suite).
  static std::string Quantized(GgmlType type) {
    const std::string out =
        *dir_ + "/stories260K-" + std::string(storage::GgmlTypeName(type)) + ".gguf";
    if (!storage::Env::Default()->FileExists(out)) {
      QuantizeOptions options;
      options.type = type;
      options.threads = 2;
      absl::StatusOr<QuantizeReport> report =
          QuantizeModel(storage::Env::Default(), *f32_, out, options);
      EXPECT_TRUE(report.ok()) << report.status();
    }
    return out;
  }

  static PerplexityResult Perplexity(const std::string& model, const std::string& text,
                                     int64_t n_ctx, int64_t stride = 0) {
    PerplexityOptions options;
    options.n_ctx = n_ctx;
    options.stride = stride;
    options.threads = 2;
    options.kv_type = kernels::ops::KvType::kF32;
    absl::StatusOr<PerplexityResult> result =
        PerplexityOfFile(storage::Env::Default(), model, text, options);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.value_or(PerplexityResult{});
  }

  static std::string* dir_;
  static std::string* f32_;
  static std::string* story_;
};

std::string* QualityTest::dir_ = nullptr;
std::string* QualityTest::f32_ = nullptr;
std::string* QualityTest::story_ = nullptr;

TEST_F(QualityTest, QuantizedFileHasExpectedTypesAndMetadata) {
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ5_1, GgmlType::kF16}) {
    SCOPED_TRACE(std::string(storage::GgmlTypeName(type)));
    auto in = storage::GgufFile::Open(storage::Env::Default(), *f32_);
    ASSERT_TRUE(in.ok()) << in.status();
    auto out = storage::GgufFile::Open(storage::Env::Default(), Quantized(type));
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ((*out)->tensors().size(), (*in)->tensors().size());
    int converted = 0;
    int want_converted = 0;
    for (size_t i = 0; i < (*in)->tensors().size(); ++i) {
      const storage::TensorInfo& a = (*in)->tensors()[i];
      const storage::TensorInfo& b = (*out)->tensors()[i];
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.shape, b.shape);
      const bool matrix = a.shape.size() == 2 && !absl::StrContains(a.name, "norm");
      const bool divides = a.shape[0] % storage::GetGgmlTypeTraits(type).block_size == 0;
      GgmlType want = matrix && divides ? type : a.type;
      // llama.cpp's output head: Q8_0 where rows (64) do not divide into 256.
      if (a.name == "output.weight" && type != GgmlType::kF16) want = GgmlType::kQ8_0;
      EXPECT_EQ(b.type, want) << b.name;
      converted += b.type == type;
      want_converted += want == type;
    }
    // At least embeddings and the 5 layers' q/k/v/o and gate/up (64 columns);
    // ffn_down's 172 columns divide into blocks of 1 (F16) but not 32.
    EXPECT_EQ(converted, want_converted);
    EXPECT_GE(converted, 1 + 5 * 6);
    EXPECT_EQ(*(*out)->GetUint("general.file_type"), *LlamaFileType(type));
    EXPECT_EQ(*(*out)->GetUint("general.quantization_version"), 2u);
    EXPECT_EQ(*(*out)->GetStringArray("tokenizer.ggml.tokens"),
              *(*in)->GetStringArray("tokenizer.ggml.tokens"));
    EXPECT_EQ(*(*out)->GetString("general.architecture"), "llama");
  }
}

TEST_F(QualityTest, KQuantsKeepRowsThatDoNotDivideIntoSuperBlocks) {
  const std::string out = *dir_ + "/stories260K-q4k.gguf";
  QuantizeOptions options;
  options.type = GgmlType::kQ4_K;
  absl::StatusOr<QuantizeReport> report =
      QuantizeModel(storage::Env::Default(), *f32_, out, options);
  ASSERT_TRUE(report.ok()) << report.status();
  // Only the output head, which llama.cpp's rule sends to Q8_0.
  EXPECT_EQ(report->converted, 1);
  EXPECT_EQ(report->kept_ragged.size(), 5u * 7 + 1);  // Every layer matrix, token_embd.
  auto gguf = storage::GgufFile::Open(storage::Env::Default(), out);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  for (const storage::TensorInfo& t : (*gguf)->tensors()) {
    EXPECT_EQ(t.type, t.name == "output.weight" ? GgmlType::kQ8_0 : GgmlType::kF32) << t.name;
  }
  EXPECT_EQ(*(*gguf)->GetUint("general.file_type"), 14u);  // LLAMA_FTYPE_MOSTLY_Q4_K_S
}

TEST_F(QualityTest, Q8_0KeepsTheGoldenGreedyTokens) {
  const std::vector<int32_t> golden = testing::StoriesGoldenIds();
  ASSERT_GE(golden.size(), 32u);
  storage::Env* env = storage::Env::Default();
  auto gguf = storage::GgufFile::Open(env, Quantized(GgmlType::kQ8_0));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto model = model::Model::Create(**gguf);
  ASSERT_TRUE(model.ok()) << model.status();
  auto file = env->NewRandomAccessFile((*gguf)->path());
  ASSERT_TRUE(file.ok()) << file.status();
  auto store = cache::ResidentChunkStore::Load(env, **file, (*model)->chunks(), {});
  ASSERT_TRUE(store.ok()) << store.status();
  kernels::ThreadPool pool(2);
  model::SequenceState state(**model, 64, kernels::ops::KvType::kF32);
  model::Forward forward(model->get(), store->get(), &pool);
  std::vector<float> logits((*model)->hparams().n_vocab);
  int32_t token = 1;  // BOS
  for (size_t i = 0; i < 32; ++i) {
    ASSERT_TRUE(forward.Run(&state, {&token, 1}, logits.data()).ok());
    token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    ASSERT_EQ(token, golden[i]) << "generated token " << i;
  }
}

TEST_F(QualityTest, Q4_0PerplexityIsWithinFivePercentOfF32) {
  const PerplexityResult f32 = Perplexity(*f32_, *story_, 64);
  const PerplexityResult q8 = Perplexity(Quantized(GgmlType::kQ8_0), *story_, 64);
  const PerplexityResult q4 = Perplexity(Quantized(GgmlType::kQ4_0), *story_, 64);
  ASSERT_GT(f32.n_chunks, 0);
  std::cout << "story, ctx 64, " << f32.n_chunks << " chunks, " << f32.n_scored
            << " tokens scored: F32 " << f32.ppl << " +/- " << f32.ppl_error << ", Q8_0 " << q8.ppl
            << " +/- " << q8.ppl_error << ", Q4_0 " << q4.ppl << " +/- " << q4.ppl_error << "\n";
  RecordProperty("ppl_f32", std::to_string(f32.ppl));
  RecordProperty("ppl_q8_0", std::to_string(q8.ppl));
  RecordProperty("ppl_q4_0", std::to_string(q4.ppl));
  EXPECT_GT(f32.ppl, 1.0);
  EXPECT_LT(f32.ppl, 100.0);  // A trained model on text like its training data.
  EXPECT_NEAR(q8.ppl / f32.ppl, 1.0, 0.01);
  EXPECT_NEAR(q4.ppl / f32.ppl, 1.0, 0.05);

  // The model's own greedy continuation is far more predictable to it.
  const std::string golden = testing::ModelPath("stories260K/golden/greedy_from_bos_256.txt");
  const PerplexityResult g32 = Perplexity(*f32_, golden, 64);
  const PerplexityResult g4 = Perplexity(Quantized(GgmlType::kQ4_0), golden, 64);
  std::cout << "golden greedy text, ctx 64: F32 " << g32.ppl << ", Q4_0 " << g4.ppl << "\n";
  EXPECT_LT(g32.ppl, f32.ppl);
  EXPECT_NEAR(g4.ppl / g32.ppl, 1.0, 0.10);
}

TEST_F(QualityTest, ChunksScoreTheirSecondHalfAndStridesTheirTail) {
  const PerplexityResult plain = Perplexity(*f32_, *story_, 64);
  ASSERT_GE(plain.n_tokens, 128);
  EXPECT_EQ(plain.n_chunks, plain.n_tokens / 64);
  EXPECT_EQ(plain.n_scored, plain.n_chunks * (64 - 32 - 1));
  EXPECT_EQ(plain.running_ppl.size(), static_cast<size_t>(plain.n_chunks));
  EXPECT_DOUBLE_EQ(plain.running_ppl.back(), plain.ppl);
  EXPECT_GT(plain.ppl_error, 0);

  const PerplexityResult strided = Perplexity(*f32_, *story_, 64, 16);
  EXPECT_EQ(strided.n_chunks, (strided.n_tokens - 64 + 15) / 16);
  EXPECT_EQ(strided.n_scored, strided.n_chunks * 16);
  EXPECT_GT(strided.ppl, 1.0);
  // Every scored token has at least 47 tokens of context rather than 32.
  EXPECT_LT(strided.ppl, plain.ppl * 1.2);

  PerplexityOptions options;
  options.n_ctx = 64;
  options.max_chunks = 2;
  auto capped = PerplexityOfFile(storage::Env::Default(), *f32_, *story_, options);
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_EQ(capped->n_chunks, 2);
}

TEST_F(QualityTest, PerplexityRefusesBadInput) {
  storage::Env* env = storage::Env::Default();
  PerplexityOptions options;
  options.n_ctx = 4096;
  auto too_short = PerplexityOfFile(env, *f32_, *story_, options);
  EXPECT_EQ(too_short.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(too_short.status().message(), "needs at least 8192"))
      << too_short.status();
  options.n_ctx = 64;
  options.stride = 65;
  EXPECT_EQ(PerplexityOfFile(env, *f32_, *story_, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.stride = 0;
  auto missing = PerplexityOfFile(env, *f32_, *dir_ + "/no-such.txt", options);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
}

TEST_F(QualityTest, QuantizeRefusesBadInput) {
  storage::Env* env = storage::Env::Default();
  QuantizeOptions options;
  auto missing = QuantizeModel(env, *dir_ + "/no-such.gguf", *dir_ + "/out.gguf", options);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "no-such.gguf")) << missing.status();
  EXPECT_FALSE(env->FileExists(*dir_ + "/out.gguf"));

  auto unknown = ParseQuantizeType("q3_xl");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(unknown.status().message(), "q4_k")) << unknown.status();
  EXPECT_EQ(*ParseQuantizeType("Q4_K"), GgmlType::kQ4_K);
  options.type = GgmlType::kIQ2_XXS;  // A type the quantizer does not write.
  EXPECT_EQ(QuantizeModel(env, *f32_, *dir_ + "/out.gguf", options).status().code(),
            absl::StatusCode::kInvalidArgument);

  // Not a GGUF file.
  auto bad = QuantizeModel(env, *story_, *dir_ + "/out.gguf", QuantizeOptions{});
  EXPECT_FALSE(bad.ok());
  EXPECT_FALSE(env->FileExists(*dir_ + "/out.gguf"));

  // Quantized sources need --allow-requantize.
  options.type = GgmlType::kQ4_0;
  auto requant = QuantizeModel(env, Quantized(GgmlType::kQ8_0), *dir_ + "/out.gguf", options);
  EXPECT_EQ(requant.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(requant.status().message(), "--allow-requantize"))
      << requant.status();
  options.allow_requantize = true;
  auto allowed = QuantizeModel(env, Quantized(GgmlType::kQ8_0), *dir_ + "/out.gguf", options);
  EXPECT_TRUE(allowed.ok()) << allowed.status();
}

// Decodes row `row` of tensor `name` of the GGUF at `path`.
std::vector<float> ReadRow(storage::Env* env, const std::string& path, const std::string& name,
                           int64_t row) {
  auto gguf = storage::GgufFile::Open(env, path);
  EXPECT_TRUE(gguf.ok()) << gguf.status();
  const storage::TensorInfo* t = (*gguf)->FindTensor(name);
  EXPECT_NE(t, nullptr) << name;
  const int64_t cols = t->shape[0];
  const uint64_t row_bytes = *storage::GgmlRowSize(t->type, cols);
  std::string bytes(row_bytes, '\0');
  auto file = env->NewRandomAccessFile(path);
  EXPECT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE((*file)->Read(t->offset + row * row_bytes, row_bytes, bytes.data()).ok());
  std::vector<float> out(cols);
  kernels::DequantizeRow(static_cast<kernels::WeightType>(t->type), bytes.data(), out.data(), cols);
  return out;
}

double RelativeRmsError(const std::vector<float>& want, const std::vector<float>& got) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += (want[i] - got[i]) * (want[i] - got[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(err / norm);
}

// K-quants need rows of 256: a synthetic llama with n_embd 256 in memory.
TEST(QuantizeSyntheticTest, KQuantsConvertRowsOf256AndStayCloseToTheSource) {
  storage::MemEnv env;
  tools::MkModelOptions mk;
  mk.out = "/m/f32.gguf";
  mk.dim = 256;
  mk.layers = 2;
  mk.heads = 4;
  mk.ffn = 512;
  mk.type = GgmlType::kF32;
  mk.threads = 2;
  ASSERT_TRUE(tools::WriteSyntheticModel(mk, &env).ok());
  const struct {
    GgmlType type;
    double max_error;
  } cases[] = {{GgmlType::kQ4_K, 0.15},   {GgmlType::kQ5_K, 0.08}, {GgmlType::kQ6_K, 0.04},
               {GgmlType::kQ2_K, 0.32},   {GgmlType::kQ3_K, 0.18}, {GgmlType::kIQ4_NL, 0.09},
               {GgmlType::kIQ4_XS, 0.09}, {GgmlType::kQ8_0, 0.01}, {GgmlType::kBF16, 0.005}};
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(storage::GgmlTypeName(c.type)));
    const std::string out = "/m/" + std::string(storage::GgmlTypeName(c.type)) + ".gguf";
    QuantizeOptions options;
    options.type = c.type;
    options.threads = 2;
    auto report = QuantizeModel(&env, mk.out, out, options);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_TRUE(report->kept_ragged.empty());
    auto gguf = storage::GgufFile::Open(&env, out);
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    EXPECT_EQ((*gguf)->FindTensor("blk.1.ffn_down.weight")->type, c.type);
    EXPECT_EQ((*gguf)->FindTensor("blk.0.attn_norm.weight")->type, GgmlType::kF32);
    const bool low_bit = c.type != GgmlType::kQ8_0 && c.type != GgmlType::kBF16;
    EXPECT_EQ((*gguf)->FindTensor("output.weight")->type, low_bit ? GgmlType::kQ6_K : c.type);
    for (const char* name : {"blk.0.attn_q.weight", "blk.1.ffn_down.weight"}) {
      for (int64_t row : {0, 7}) {
        EXPECT_LT(RelativeRmsError(ReadRow(&env, mk.out, name, row), ReadRow(&env, out, name, row)),
                  c.max_error)
            << name << " row " << row;
      }
    }
    EXPECT_FALSE(env.FileExists(out + ".quantize-tmp"));
  }
}

// mxfp4 as llama.cpp's MXFP4_MOE: the expert stacks MXFP4, every other
// matrix Q8_0, the head Q6_K; --pure makes them all MXFP4.
TEST(QuantizeSyntheticTest, Mxfp4QuantizesTheExpertsAsLlamaCppsMxfp4Moe) {
  storage::MemEnv env;
  tools::MkModelOptions mk;
  mk.arch = tools::SyntheticArch::kQwen3Moe;
  mk.out = "/m/f32.gguf";
  mk.dim = 256;
  mk.layers = 2;
  mk.heads = 4;
  mk.experts = 4;
  mk.expert_ffn = 128;
  mk.type = GgmlType::kF32;
  mk.threads = 2;
  ASSERT_TRUE(tools::WriteSyntheticModel(mk, &env).ok());
  for (bool pure : {false, true}) {
    SCOPED_TRACE(pure ? "pure" : "mixture");
    const std::string out = pure ? "/m/mxfp4-pure.gguf" : "/m/mxfp4.gguf";
    QuantizeOptions options;
    options.type = GgmlType::kMXFP4;
    options.pure = pure;
    options.threads = 2;
    auto report = QuantizeModel(&env, mk.out, out, options);
    ASSERT_TRUE(report.ok()) << report.status();
    auto gguf = storage::GgufFile::Open(&env, out);
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    EXPECT_EQ(*(*gguf)->GetUint("general.file_type"), 38u);
    EXPECT_EQ((*gguf)->FindTensor("blk.1.ffn_down_exps.weight")->type, GgmlType::kMXFP4);
    EXPECT_EQ((*gguf)->FindTensor("blk.0.ffn_gate_exps.weight")->type, GgmlType::kMXFP4);
    EXPECT_EQ((*gguf)->FindTensor("blk.0.attn_q.weight")->type,
              pure ? GgmlType::kMXFP4 : GgmlType::kQ8_0);
    EXPECT_EQ((*gguf)->FindTensor("output.weight")->type,
              pure ? GgmlType::kMXFP4 : GgmlType::kQ6_K);
    EXPECT_EQ((*gguf)->FindTensor("blk.0.attn_norm.weight")->type, GgmlType::kF32);
    for (int64_t row : {0, 5}) {
      // 3 bits of E2M1 and a power-of-two scale per 32: ~0.1 on Gaussian rows.
      EXPECT_LT(RelativeRmsError(ReadRow(&env, mk.out, "blk.1.ffn_down_exps.weight", row),
                                 ReadRow(&env, out, "blk.1.ffn_down_exps.weight", row)),
                0.15)
          << "row " << row;
    }
  }
}

TEST(QuantizeSyntheticTest, ReadErrorsNameTheTensorAndLeaveNoOutput) {
  storage::MemEnv mem;
  tools::MkModelOptions mk;
  mk.out = "/m/f32.gguf";
  mk.dim = 256;
  mk.layers = 2;
  mk.heads = 4;
  mk.type = GgmlType::kF32;
  ASSERT_TRUE(tools::WriteSyntheticModel(mk, &mem).ok());
  auto gguf = storage::GgufFile::Open(&mem, mk.out);
  ASSERT_TRUE(gguf.ok());
  const storage::TensorInfo* victim = (*gguf)->FindTensor("blk.1.ffn_up.weight");
  ASSERT_NE(victim, nullptr);
  // Past the first MiB, which the header reader reads in one piece.
  ASSERT_GT(victim->offset, 1u << 20);

  storage::RetryPolicy retry;
  retry.initial_backoff = absl::Microseconds(1);
  storage::FaultEnv env(&mem, retry);
  env.InjectShortRead({mk.out, 0, (*gguf)->file_size()}, 3);
  QuantizeOptions options;
  options.type = GgmlType::kQ4_0;
  ASSERT_TRUE(QuantizeModel(&env, mk.out, "/m/short.gguf", options).ok());

  env.InjectEio({mk.out, victim->offset, victim->offset + 1}, storage::kFaultForever);
  auto failed = QuantizeModel(&env, mk.out, "/m/eio.gguf", options);
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::StrContains(failed.status().message(), "blk.1.ffn_up.weight"))
      << failed.status();
  EXPECT_FALSE(mem.FileExists("/m/eio.gguf"));
  EXPECT_FALSE(mem.FileExists("/m/eio.gguf.quantize-tmp"));
}

}  // namespace
}  // namespace waste::quality
