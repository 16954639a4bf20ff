// Importance matrices: llama.cpp's legacy file format both ways (our reader
// reads llama-imatrix's quant-conformance/imatrix.dat), `wasted imatrix` on
// the fixture's base model reproducing llama-imatrix's values, the expert
// and per-head layouts of MoE and MLA models, and importance-weighted
// quantization: less weighted error than plain rounding on the fixture's
// tensors, deterministic, and files that load and run.
#include "daemon/quality/imatrix.h"

#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "daemon/kernels/dequantize.h"
#include "daemon/kernels/quant_blocks.h"
#include "daemon/kernels/quantize.h"
#include "daemon/quality/imatrix_collector.h"
#include "daemon/quality/kl_divergence.h"
#include "daemon/quality/perplexity.h"
#include "daemon/quality/quantize_model.h"
#include "daemon/tools/synthetic_model.h"
#include "gtest/gtest.h"
#include "storage/env.h"
#include "storage/gguf.h"
#include "tests/testdata.h"

namespace waste::quality {
namespace {

using kernels::WeightType;
using storage::GgmlType;

std::string Fixture(const std::string& name) {
  return testing::ModelPath("quant-conformance/" + name);
}

ImportanceMatrix SmallMatrix() {
  ImportanceMatrix m;
  m.entries["blk.0.attn_q.weight"] = {3, {0.5f, 1.5f, 3.0f, 6.0f}};
  m.entries["blk.1.ffn_down_exps.weight"] = {7, {1, 2, 3, 4, 5, 6, 7, 8}};
  m.last_call = 7;
  m.dataset = "calib.txt";
  return m;
}

void ExpectSameMatrix(const ImportanceMatrix& a, const ImportanceMatrix& b) {
  ASSERT_EQ(a.entries.size(), b.entries.size());
  for (const auto& [name, entry] : a.entries) {
    const ImatrixEntry* other = b.Find(name);
    ASSERT_NE(other, nullptr) << name;
    EXPECT_EQ(entry.ncall, other->ncall) << name;
    EXPECT_EQ(entry.values, other->values) << name;
  }
  EXPECT_EQ(a.last_call, b.last_call);
  EXPECT_EQ(a.dataset, b.dataset);
}

TEST(ImatrixFile, RoundTripsAndDividesByCalls) {
  const ImportanceMatrix m = SmallMatrix();
  const std::string bytes = EncodeImatrix(m);
  // 4 + per entry (4 + name + 4 + 4 + 4 * nval) + 4 + 4 + dataset.
  EXPECT_EQ(bytes.size(), 4 + (12 + 19 + 16) + (12 + 26 + 32) + 8 + 9);
  absl::StatusOr<ImportanceMatrix> back = DecodeImatrix(bytes, "mem");
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameMatrix(m, *back);
  EXPECT_EQ(back->Find("blk.0.attn_q.weight")->Importance(),
            (std::vector<float>{0.5f / 3, 0.5f, 1.0f, 2.0f}));
  EXPECT_EQ(back->Find("nope"), nullptr);

  // Older files end after the entries.
  const size_t trailer = 8 + m.dataset.size();
  absl::StatusOr<ImportanceMatrix> old =
      DecodeImatrix(std::string_view(bytes).substr(0, bytes.size() - trailer), "old");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->entries.size(), 2u);
  EXPECT_EQ(old->last_call, 0);

  // Through a file.
  const std::string path = testing::TempDir() + "/m.imatrix";
  ASSERT_TRUE(WriteImatrix(storage::Env::Default(), path, m).ok());
  absl::StatusOr<ImportanceMatrix> read = ReadImatrix(storage::Env::Default(), path);
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSameMatrix(m, *read);
}

TEST(ImatrixFile, RefusesBrokenFiles) {
  const std::string bytes = EncodeImatrix(SmallMatrix());
  // Every truncation inside the entries is an error, never a crash.
  for (size_t n = 0; n < bytes.size() - 17; ++n) {
    absl::StatusOr<ImportanceMatrix> m = DecodeImatrix(bytes.substr(0, n), "cut");
    if (n == 4 + 47 + 70) continue;  // Exactly the entries: an old file.
    EXPECT_FALSE(m.ok()) << "accepted " << n << " of " << bytes.size() << " bytes";
    if (!m.ok()) {
      EXPECT_TRUE(absl::StrContains(m.status().message(), "cut")) << m.status();
    }
  }
  auto patched = [&](size_t offset, int32_t v) {
    std::string b = bytes;
    std::memcpy(b.data() + offset, &v, 4);
    return DecodeImatrix(b, "patched").status();
  };
  EXPECT_FALSE(patched(0, 0).ok());                     // No entries.
  EXPECT_FALSE(patched(4, -1).ok());                    // Name length.
  EXPECT_FALSE(patched(4 + 4 + 19 + 4, 1 << 30).ok());  // nval beyond the file.
  EXPECT_FALSE(patched(4 + 4 + 19 + 4, 0).ok());        // nval 0.
  const float nan = std::nanf("");
  int32_t nan_bits;
  std::memcpy(&nan_bits, &nan, 4);
  EXPECT_FALSE(patched(4 + 4 + 19 + 8, nan_bits).ok());  // A value.
  EXPECT_FALSE(DecodeImatrix(bytes + "x", "long").ok());
  absl::StatusOr<ImportanceMatrix> missing =
      ReadImatrix(storage::Env::Default(), testing::TempDir() + "/none.dat");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "wasted imatrix"));
}

TEST(ImatrixFile, ReadsLlamaImatrixOutput) {
  absl::StatusOr<ImportanceMatrix> m = ReadImatrix(storage::Env::Default(), Fixture("imatrix.dat"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->entries.size(), 7u);
  EXPECT_EQ(m->last_call, 115);
  EXPECT_EQ(m->dataset, "calib.txt");
  for (const char* name : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up"}) {
    const ImatrixEntry* e = m->Find(absl::StrFormat("blk.0.%s.weight", name));
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(e->ncall, 115);
    EXPECT_EQ(e->values.size(), 256u);
  }
  const ImatrixEntry* down = m->Find("blk.0.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->values.size(), 512u);
  // attn_q's input is RMS-normed with unit norm weights: mean x^2 is 1.
  double mean = 0;
  for (float v : m->Find("blk.0.attn_q.weight")->Importance()) mean += v / 256;
  EXPECT_NEAR(mean, 1.0, 1e-3);
  // Our writer's bytes read back to the same values.
  absl::StatusOr<ImportanceMatrix> again = DecodeImatrix(EncodeImatrix(*m), "again");
  ASSERT_TRUE(again.ok());
  ExpectSameMatrix(*m, *again);
}

// wasted imatrix on the fixture's base model and text, with llama-imatrix's
// context of 64: the same entries, calls and values (to float rounding and
// the F16 KV cache's differences) as llama.cpp's own imatrix.dat.
TEST(Imatrix, ReproducesLlamaImatrix) {
  ImatrixOptions options;
  options.n_ctx = 64;
  options.threads = 2;
  absl::StatusOr<ImatrixRun> run = ComputeImatrix(storage::Env::Default(), Fixture("base-f32.gguf"),
                                                  Fixture("text.txt"), options);
  ASSERT_TRUE(run.ok()) << run.status();
  absl::StatusOr<ImportanceMatrix> want =
      ReadImatrix(storage::Env::Default(), Fixture("imatrix.dat"));
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(run->n_chunks, 115);
  EXPECT_EQ(run->matrix.last_call, 115);
  EXPECT_EQ(run->matrix.dataset, "text.txt");
  EXPECT_TRUE(run->warnings.empty());
  ASSERT_EQ(run->matrix.entries.size(), want->entries.size());
  for (const auto& [name, entry] : want->entries) {
    const ImatrixEntry* got = run->matrix.Find(name);
    ASSERT_NE(got, nullptr) << name;
    EXPECT_EQ(got->ncall, entry.ncall) << name;
    ASSERT_EQ(got->values.size(), entry.values.size()) << name;
    double worst = 0;
    for (size_t j = 0; j < entry.values.size(); ++j) {
      worst = std::max(worst, std::fabs(got->values[j] / entry.values[j] - 1.0));
    }
    EXPECT_LT(worst, 1e-3) << name;
  }
}

// A synthetic MoE model with MLA: experts and heads get one block of
// columns each; with every expert used, each expert saw every token, so
// its block equals the router's (same input, same tokens).
TEST(Imatrix, ExpertsAndHeadsGetTheirOwnColumns) {
  const std::string dir = testing::TempDir();
  tools::MkModelOptions mk;
  mk.arch = tools::SyntheticArch::kDeepseek2;
  mk.out = dir + "/ds2.gguf";
  mk.dim = 64;
  mk.layers = 2;
  mk.heads = 2;
  mk.head_dim = 32;
  mk.experts = 4;
  mk.experts_used = 4;
  mk.expert_ffn = 32;
  mk.ffn = 96;
  mk.ctx = 256;
  mk.type = GgmlType::kF32;
  mk.threads = 2;
  ASSERT_TRUE(tools::WriteSyntheticModel(mk, storage::Env::Default()).ok());
  const std::string text = dir + "/text.txt";
  std::string words;
  for (int i = 0; i < 400; ++i) words += absl::StrFormat("word%d and more %d. ", i % 37, i % 11);
  ASSERT_TRUE(storage::WriteFileAtomically(storage::Env::Default(), text, words).ok());

  ImatrixOptions options;
  options.n_ctx = 32;
  options.max_chunks = 3;
  options.threads = 2;
  absl::StatusOr<ImatrixRun> run = ComputeImatrix(storage::Env::Default(), mk.out, text, options);
  ASSERT_TRUE(run.ok()) << run.status();
  const ImportanceMatrix& m = run->matrix;
  EXPECT_EQ(m.last_call, 3);
  const ImatrixEntry* router = m.Find("blk.1.ffn_gate_inp.weight");
  const ImatrixEntry* gate = m.Find("blk.1.ffn_gate_exps.weight");
  const ImatrixEntry* up = m.Find("blk.1.ffn_up_exps.weight");
  const ImatrixEntry* down = m.Find("blk.1.ffn_down_exps.weight");
  const ImatrixEntry* k_b = m.Find("blk.0.attn_k_b.weight");
  const ImatrixEntry* v_b = m.Find("blk.0.attn_v_b.weight");
  for (const ImatrixEntry* e : {router, gate, up, down, k_b, v_b}) ASSERT_NE(e, nullptr);
  EXPECT_EQ(router->values.size(), 64u);
  EXPECT_EQ(gate->values.size(), 4u * 64);
  EXPECT_EQ(down->values.size(), 4u * 32);
  EXPECT_EQ(gate->values, up->values);
  for (int e = 0; e < 4; ++e) {
    for (int j = 0; j < 64; ++j) {
      EXPECT_NEAR(gate->values[e * 64 + j] / router->values[j], 1.0, 1e-4) << e << " " << j;
    }
  }
  // attn_k_b: per head, the head's qk_nope columns; attn_v_b: the latent.
  absl::StatusOr<std::unique_ptr<storage::GgufFile>> gguf =
      storage::GgufFile::Open(storage::Env::Default(), mk.out);
  ASSERT_TRUE(gguf.ok());
  const storage::TensorInfo* k_b_info = (*gguf)->FindTensor("blk.0.attn_k_b.weight");
  const storage::TensorInfo* v_b_info = (*gguf)->FindTensor("blk.0.attn_v_b.weight");
  ASSERT_NE(k_b_info, nullptr);
  ASSERT_NE(v_b_info, nullptr);
  EXPECT_EQ(k_b->values.size(), static_cast<size_t>(k_b_info->shape[0] * k_b_info->shape[2]));
  EXPECT_EQ(v_b->values.size(), static_cast<size_t>(v_b_info->shape[0] * v_b_info->shape[2]));
  // The heads see different inputs.
  EXPECT_NE(std::vector<float>(k_b->values.begin(), k_b->values.begin() + k_b_info->shape[0]),
            std::vector<float>(k_b->values.begin() + k_b_info->shape[0],
                               k_b->values.begin() + 2 * k_b_info->shape[0]));
  // Nothing outside the blocks unless asked: the head is output.weight.
  EXPECT_EQ(m.Find("output.weight"), nullptr);
  EXPECT_EQ(m.Find("token_embd.weight"), nullptr);

  // With fewer experts per token, each expert's block averages only its
  // own tokens: blocks differ from one another.
  mk.experts_used = 1;
  mk.out = dir + "/ds2-top1.gguf";
  ASSERT_TRUE(tools::WriteSyntheticModel(mk, storage::Env::Default()).ok());
  run = ComputeImatrix(storage::Env::Default(), mk.out, text, options);
  ASSERT_TRUE(run.ok()) << run.status();
  gate = run->matrix.Find("blk.1.ffn_gate_exps.weight");
  ASSERT_NE(gate, nullptr);
  EXPECT_NE(std::vector<float>(gate->values.begin(), gate->values.begin() + 64),
            std::vector<float>(gate->values.begin() + 64, gate->values.begin() + 128));

  // A file from before llama.cpp's MLA split: attn_kv_b's input is the normed
  // latent, for all its rows (what llama-imatrix records of it); an RMS norm
  // with weights 1 makes each token's squares average 1.
  mk.experts_used = 4;
  mk.mla_fused = true;
  mk.out = dir + "/ds2-fused.gguf";
  ASSERT_TRUE(tools::WriteSyntheticModel(mk, storage::Env::Default()).ok());
  run = ComputeImatrix(storage::Env::Default(), mk.out, text, options);
  ASSERT_TRUE(run.ok()) << run.status();
  const ImatrixEntry* kv_b = run->matrix.Find("blk.0.attn_kv_b.weight");
  ASSERT_NE(kv_b, nullptr);
  EXPECT_EQ(kv_b->values.size(), 16u);  // kv_lora_rank: dim / 4.
  double mean = 0;
  for (float v : kv_b->values) mean += v / kv_b->ncall;
  EXPECT_NEAR(mean / kv_b->values.size(), 1.0, 1e-3);
  EXPECT_EQ(run->matrix.Find("blk.0.attn_k_b.weight"), nullptr);
  EXPECT_NE(run->matrix.Find("blk.0.attn_q_b.weight"), nullptr);
}

// Reads a tensor of `path` as f32 rows.
std::vector<float> ReadF32Tensor(const std::string& path, const std::string& name, int64_t* cols) {
  storage::Env* env = storage::Env::Default();
  auto gguf = storage::GgufFile::Open(env, path);
  EXPECT_TRUE(gguf.ok()) << gguf.status();
  const storage::TensorInfo* t = (*gguf)->FindTensor(name);
  EXPECT_NE(t, nullptr) << name;
  auto file = env->NewRandomAccessFile(path);
  std::string bytes(t->size, '\0');
  EXPECT_TRUE((*file)->Read(t->offset, t->size, bytes.data()).ok());
  *cols = t->shape[0];
  std::vector<float> out(t->NumElements());
  const uint64_t row_bytes = t->size / t->NumRows();
  for (int64_t r = 0; r < t->NumRows(); ++r) {
    kernels::DequantizeRow(static_cast<WeightType>(static_cast<uint32_t>(t->type)),
                           bytes.data() + r * row_bytes, &out[r * *cols], *cols);
  }
  return out;
}

GgmlType TensorType(const std::string& path, const std::string& name) {
  auto gguf = storage::GgufFile::Open(storage::Env::Default(), path);
  const storage::TensorInfo* t = (*gguf)->FindTensor(name);
  return t != nullptr ? t->type : GgmlType::kF32;
}

// sum over rows and columns of importance_j (w - y)^2: the expected squared
// error of the matrix's outputs for inputs of those mean squares.
double WeightedError(const std::vector<float>& w, const std::vector<float>& y,
                     const std::vector<float>& importance, int64_t cols) {
  double err = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const double d = w[i] - y[i];
    err += importance[i % cols] * d * d;
  }
  return err;
}

std::vector<float> RoundTrip(WeightType type, const std::vector<float>& w, int64_t cols,
                             const float* importance, std::string* bytes_out = nullptr) {
  const int64_t rows = static_cast<int64_t>(w.size()) / cols;
  const int64_t row_bytes = kernels::RowBytes(type, cols);
  std::string bytes(rows * row_bytes, '\0');
  std::vector<float> y(w.size());
  for (int64_t r = 0; r < rows; ++r) {
    kernels::QuantizeRowWeighted(type, &w[r * cols], bytes.data() + r * row_bytes, cols,
                                 importance);
    kernels::DequantizeRow(type, bytes.data() + r * row_bytes, &y[r * cols], cols);
  }
  if (bytes_out != nullptr) *bytes_out = bytes;
  return y;
}

// On the fixture's ffn_down (512 columns, importances spread over 30x) and
// attn_q (K-quants), with llama-imatrix's importances: the weighted search beats plain
// rounding for every type it serves, and lands near llama-quantize's own
// error for the same tensor (printed for the record).
TEST(ImatrixQuantization, ReducesWeightedErrorOnARealTensor) {
  absl::StatusOr<ImportanceMatrix> m = ReadImatrix(storage::Env::Default(), Fixture("imatrix.dat"));
  ASSERT_TRUE(m.ok()) << m.status();
  const struct {
    WeightType type;
    const char* name;
  } kTypes[] = {{WeightType::kQ2_K, "Q2_K"},       {WeightType::kQ3_K, "Q3_K"},
                {WeightType::kQ4_K, "Q4_K"},       {WeightType::kQ5_K, "Q5_K"},
                {WeightType::kQ6_K, "Q6_K"},       {WeightType::kIQ4_XS, "IQ4_XS"},
                {WeightType::kIQ4_NL, "IQ4_NL"},   {WeightType::kIQ3_S, "IQ3_S"},
                {WeightType::kIQ3_XXS, "IQ3_XXS"}, {WeightType::kIQ2_S, "IQ2_S"},
                {WeightType::kIQ2_XS, "IQ2_XS"},   {WeightType::kIQ2_XXS, "IQ2_XXS"},
                {WeightType::kIQ1_M, "IQ1_M"},     {WeightType::kIQ1_S, "IQ1_S"},
                {WeightType::kQ4_0, "Q4_0"}};
  for (const char* tensor : {"blk.0.ffn_down.weight", "blk.0.attn_q.weight"}) {
    int64_t cols = 0;
    const std::vector<float> w = ReadF32Tensor(Fixture("base-f32.gguf"), tensor, &cols);
    const std::vector<float> importance = m->Find(tensor)->Importance();
    ASSERT_EQ(static_cast<int64_t>(importance.size()), cols);
    // attn_q again for the K-quants only (the codebook types' searches are
    // the slow part of the suite).
    const bool second = absl::StrContains(tensor, "attn_q");
    for (const auto& [type, name] : kTypes) {
      if (second && kernels::GetWeightTypeInfo(type).name[0] == 'I') continue;
      SCOPED_TRACE(std::string(tensor) + " " + name);
      const double plain = WeightedError(w, RoundTrip(type, w, cols, nullptr), importance, cols);
      std::string bytes, again;
      const double weighted =
          WeightedError(w, RoundTrip(type, w, cols, importance.data(), &bytes), importance, cols);
      // Deterministic: the same bytes twice.
      if (!second) {
        RoundTrip(type, w, cols, importance.data(), &again);
        EXPECT_EQ(bytes, again);
      }
      std::string line = absl::StrFormat("%-22s %-8s plain %10.4f  imatrix %10.4f (%5.1f%%)",
                                         tensor, name, plain, weighted, 100 * weighted / plain);
      // llama-quantize's file of this type, where it has this tensor in it.
      const std::string file = Fixture(std::string(name) + ".gguf");
      if (storage::Env::Default()->FileExists(file) &&
          TensorType(file, tensor) == static_cast<GgmlType>(static_cast<uint32_t>(type))) {
        int64_t c = 0;
        const double llama = WeightedError(
            w, ReadF32Tensor(Fixture(std::string(name) + ".dequant-f32.gguf"), tensor, &c),
            importance, cols);
        line += absl::StrFormat("  llama.cpp %10.4f (ours/llama %.3f)", llama, weighted / llama);
      }
      std::cout << line << "\n";
      EXPECT_LT(weighted, plain);
    }
  }
}

std::string ReadAll(const std::string& path) {
  absl::StatusOr<std::string> bytes = storage::ReadFileToString(storage::Env::Default(), path);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.value_or("");
}

// wasted quantize --imatrix end to end on the fixture's base model: the
// types that need a matrix are refused without one; with llama-imatrix's
// matrix every type is written deterministically, loads and runs; and the
// weighted Q4_K and Q2_K are closer to the F32 model (KL divergence of the
// next-token distributions) than plain rounding.
TEST(ImatrixQuantization, QuantizedFilesLoadRunAndMoveTowardsF32) {
  storage::Env* env = storage::Env::Default();
  const std::string dir = testing::TempDir();
  absl::StatusOr<ImportanceMatrix> m = ReadImatrix(env, Fixture("imatrix.dat"));
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string base = Fixture("base-f32.gguf");

  QuantizeOptions options;
  options.type = GgmlType::kIQ2_XXS;
  options.threads = 2;
  absl::StatusOr<QuantizeReport> refused = QuantizeModel(env, base, dir + "/x.gguf", options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "wasted imatrix"));
  EXPECT_FALSE(env->FileExists(dir + "/x.gguf"));
  // --pure asks IQ2_XXS of token_embd too, which has no entry.
  options.imatrix = &*m;
  options.pure = true;
  refused = QuantizeModel(env, base, dir + "/x.gguf", options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "token_embd.weight"));
  // An entry of the wrong size.
  ImportanceMatrix wrong = *m;
  wrong.entries["blk.0.attn_q.weight"].values.resize(128);
  options.imatrix = &wrong;
  options.pure = false;
  options.type = GgmlType::kQ4_K;
  refused = QuantizeModel(env, base, dir + "/x.gguf", options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "blk.0.attn_q.weight"));

  PerplexityOptions ppl;
  ppl.n_ctx = 64;
  ppl.max_chunks = 12;
  ppl.threads = 2;
  absl::StatusOr<Evaluation> f32 = LoadEvaluation(env, base, Fixture("text.txt"), ppl);
  ASSERT_TRUE(f32.ok()) << f32.status();
  kernels::ThreadPool pool(2);
  auto kl_of = [&](const std::string& path) {
    absl::StatusOr<Evaluation> q = LoadEvaluation(env, path, Fixture("text.txt"), ppl);
    EXPECT_TRUE(q.ok()) << q.status();
    if (!q.ok()) return KlDivergenceResult{};
    absl::StatusOr<KlDivergenceResult> kl = ComputeKlDivergence(*f32, *q, &pool, ppl);
    EXPECT_TRUE(kl.ok()) << kl.status();
    return kl.value_or(KlDivergenceResult{});
  };
  // The reference against itself.
  absl::StatusOr<KlDivergenceResult> self = ComputeKlDivergence(*f32, *f32, &pool, ppl);
  ASSERT_TRUE(self.ok()) << self.status();
  EXPECT_LT(self->kl_mean, 1e-9);
  EXPECT_EQ(self->top1_agree, 1.0);
  EXPECT_EQ(self->ppl, self->base_ppl);

  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ2_K, GgmlType::kIQ2_XXS}) {
    const std::string name(storage::GgmlTypeName(type));
    SCOPED_TRACE(name);
    options.type = type;
    options.imatrix = &*m;
    options.pure = type != GgmlType::kIQ2_XXS;
    const std::string weighted = dir + "/" + name + "-imatrix.gguf";
    absl::StatusOr<QuantizeReport> report = QuantizeModel(env, base, weighted, options);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->weighted, 7);  // The 7 entries; token_embd/output searched evenly.
    // Deterministic, whatever the threads.
    options.threads = 1;
    ASSERT_TRUE(QuantizeModel(env, base, weighted + ".again", options).ok());
    options.threads = 2;
    EXPECT_EQ(ReadAll(weighted), ReadAll(weighted + ".again"));
    const KlDivergenceResult with = kl_of(weighted);
    std::string line =
        absl::StrFormat("%-8s imatrix: KLD %.6f, PPL %.2f", name, with.kl_mean, with.ppl);
    EXPECT_GT(with.kl_mean, 0);
    if (type != GgmlType::kIQ2_XXS) {
      options.imatrix = nullptr;
      const std::string plain = dir + "/" + name + "-plain.gguf";
      ASSERT_TRUE(QuantizeModel(env, base, plain, options).ok());
      const KlDivergenceResult without = kl_of(plain);
      line += absl::StrFormat("; plain: KLD %.6f, PPL %.2f", without.kl_mean, without.ppl);
      EXPECT_LT(with.kl_mean, without.kl_mean);
    }
    std::cout << line << "\n";
  }
}

}  // namespace
}  // namespace waste::quality
