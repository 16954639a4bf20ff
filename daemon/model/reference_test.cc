// The forward pass against an independent, obviously-correct reference:
// every weight dequantized to double, plain loops, no batching, no cache
// tricks. Synthetic llama, qwen2 (QKV bias, NeoX rope) and qwen3 (Q/K norm)
// models from mkmodel.
#include <cmath>
#include <map>

#include "daemon/cache/resident_store.h"
#include "daemon/kernels/dequantize.h"
#include "daemon/model/forward.h"
#include "daemon/tools/mkmodel.h"
#include "gtest/gtest.h"
#include "storage/env.h"
#include "storage/logging.h"
#include "tests/testdata.h"

namespace waste::model {
namespace {

using Vec = std::vector<double>;

// A reference implementation of the llama-family forward pass.
class Reference {
 public:
  Reference(const storage::GgufFile& gguf, const HParams& hp) : gguf_(gguf), hp_(hp) {
    auto file = storage::Env::Default()->NewRandomAccessFile(gguf.path());
    WCHECK(file.ok());
    file_ = *std::move(file);
  }

  // Logits after feeding `token` at the next position.
  Vec Step(int32_t token) {
    const int64_t d = hp_.n_embd, hd = hp_.head_dim;
    Vec x = Row("token_embd.weight", token);
    for (int64_t l = 0; l < hp_.n_layer; ++l) {
      std::string p = "blk." + std::to_string(l) + ".";
      Vec xn = Norm(x, Tensor(p + "attn_norm.weight"));
      Vec q = MatVec(p + "attn_q.weight", xn), k = MatVec(p + "attn_k.weight", xn),
          v = MatVec(p + "attn_v.weight", xn);
      if (Has(p + "attn_q.bias")) {
        AddTo(&q, Tensor(p + "attn_q.bias"));
        AddTo(&k, Tensor(p + "attn_k.bias"));
        AddTo(&v, Tensor(p + "attn_v.bias"));
      }
      for (int64_t h = 0; h < hp_.n_head; ++h) Head(&q, h, p + "attn_q_norm.weight");
      for (int64_t h = 0; h < hp_.n_head_kv; ++h) Head(&k, h, p + "attn_k_norm.weight");
      keys_[l].push_back(k);
      values_[l].push_back(v);
      Vec out(hp_.q_dim(), 0.0);
      for (int64_t h = 0; h < hp_.n_head; ++h) {
        int64_t g = h / (hp_.n_head / hp_.n_head_kv);
        Vec scores;
        for (const Vec& key : keys_[l]) {
          double s = 0;
          for (int64_t i = 0; i < hd; ++i) s += q[h * hd + i] * key[g * hd + i];
          scores.push_back(s / std::sqrt(static_cast<double>(hd)));
        }
        double max = *std::max_element(scores.begin(), scores.end()), sum = 0;
        for (double& s : scores) sum += (s = std::exp(s - max));
        for (size_t t = 0; t < scores.size(); ++t) {
          for (int64_t i = 0; i < hd; ++i) {
            out[h * hd + i] += scores[t] / sum * values_[l][t][g * hd + i];
          }
        }
      }
      AddTo(&x, MatVec(p + "attn_output.weight", out));
      xn = Norm(x, Tensor(p + "ffn_norm.weight"));
      Vec gate = MatVec(p + "ffn_gate.weight", xn), up = MatVec(p + "ffn_up.weight", xn);
      for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
      AddTo(&x, MatVec(p + "ffn_down.weight", gate));
    }
    ++pos_;
    Vec xn = Norm(x, Tensor("output_norm.weight"));
    return MatVec(Has("output.weight") ? "output.weight" : "token_embd.weight", xn);
  }

 private:
  bool Has(const std::string& name) const { return gguf_.FindTensor(name) != nullptr; }

  // Row `r` of a tensor, dequantized.
  Vec Row(const std::string& name, int64_t r) {
    const storage::TensorInfo* t = gguf_.FindTensor(name);
    int64_t cols = t->shape[0];
    uint64_t row_bytes = t->size / t->NumRows();
    std::string bytes(row_bytes, '\0');
    WCHECK(file_->Read(t->offset + r * row_bytes, row_bytes, bytes.data()).ok());
    std::vector<float> f(cols);
    kernels::DequantizeRow(static_cast<kernels::WeightType>(t->type), bytes.data(), f.data(), cols);
    return Vec(f.begin(), f.end());
  }
  Vec Tensor(const std::string& name) { return Row(name, 0); }

  Vec MatVec(const std::string& name, const Vec& x) {
    int64_t rows = gguf_.FindTensor(name)->NumRows();
    Vec y(rows);
    for (int64_t r = 0; r < rows; ++r) {
      Vec w = Row(name, r);
      double s = 0;
      for (size_t i = 0; i < w.size(); ++i) s += w[i] * x[i];
      y[r] = s;
    }
    return y;
  }

  Vec Norm(const Vec& x, const Vec& w) const {
    double ss = 0;
    for (double v : x) ss += v * v;
    double scale = 1 / std::sqrt(ss / x.size() + hp_.rms_eps);
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w[i];
    return y;
  }

  static void AddTo(Vec* x, const Vec& y) {
    for (size_t i = 0; i < x->size(); ++i) (*x)[i] += y[i];
  }

  // Optional per-head RMS norm, then RoPE, of head `h` of `v`.
  void Head(Vec* v, int64_t h, const std::string& norm) {
    const int64_t hd = hp_.head_dim, n_rot = hp_.rope.n_rot;
    Vec head(v->begin() + h * hd, v->begin() + (h + 1) * hd);
    if (Has(norm)) head = Norm(head, Tensor(norm));
    bool neox = hp_.rope.mode == kernels::ops::RopeMode::kNeox;
    for (int64_t i = 0; i < n_rot / 2; ++i) {
      double theta = pos_ * std::pow(hp_.rope.freq_base, -2.0 * i / n_rot);
      int64_t a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
      double x0 = head[a], x1 = head[b];
      head[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
      head[b] = x0 * std::sin(theta) + x1 * std::cos(theta);
    }
    std::copy(head.begin(), head.end(), v->begin() + h * hd);
  }

  const storage::GgufFile& gguf_;
  const HParams& hp_;
  std::unique_ptr<storage::RandomAccessFile> file_;
  std::map<int64_t, std::vector<Vec>> keys_, values_;
  int64_t pos_ = 0;
};

struct Case {
  const char* name;
  tools::SyntheticArch arch;
  storage::GgmlType type;
  double tolerance;  // Relative to the logits' scale.
};

class ReferenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(ReferenceTest, LogitsMatchTheReferenceForEightSteps) {
  const Case& c = GetParam();
  tools::MkModelOptions options;
  options.arch = c.arch;
  options.out = testing::TempDir() + "/" + c.name + ".gguf";
  options.dim = 128;
  options.layers = 2;
  options.heads = 4;
  options.kv_heads = 2;
  options.ffn = 256;
  options.vocab = 320;
  options.type = c.type;
  options.seed = 7;
  storage::Env* env = storage::Env::Default();
  auto written = tools::WriteSyntheticModel(options, env);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  auto gguf = storage::GgufFile::Open(env, options.out);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto model = Model::Create(**gguf);
  ASSERT_TRUE(model.ok()) << model.status();
  auto file = env->NewRandomAccessFile(options.out);
  ASSERT_TRUE(file.ok());
  auto store = cache::ResidentChunkStore::Load(env, **file, (*model)->chunks(), {});
  ASSERT_TRUE(store.ok()) << store.status();
  kernels::ThreadPool pool(2);
  SequenceState state(**model, 64, kernels::ops::KvType::kF32);
  Forward forward(model->get(), store->get(), &pool);
  Reference reference(**gguf, (*model)->hparams());
  std::vector<float> logits((*model)->hparams().n_vocab);
  for (int32_t token : {1, 17, 200, 42, 42, 319, 0, 128}) {
    ASSERT_TRUE(forward.Run(&state, {&token, 1}, logits.data()).ok());
    Vec want = reference.Step(token);
    double scale = 0;
    for (double v : want) scale = std::max(scale, std::fabs(v));
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(logits[i], want[i], c.tolerance * scale)
          << c.name << " position " << state.n_past() - 1 << " logit " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Architectures, ReferenceTest,
    ::testing::Values(
        Case{"llama_f32", tools::SyntheticArch::kLlama, storage::GgmlType::kF32, 1e-4},
        Case{"qwen2_f32", tools::SyntheticArch::kQwen2, storage::GgmlType::kF32, 1e-4},
        Case{"qwen3_f32", tools::SyntheticArch::kQwen3, storage::GgmlType::kF32, 1e-4},
        Case{"qwen3_q8_0", tools::SyntheticArch::kQwen3, storage::GgmlType::kQ8_0, 2e-2},
        Case{"llama_q4_k", tools::SyntheticArch::kLlama, storage::GgmlType::kQ4_K, 5e-2}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace waste::model
