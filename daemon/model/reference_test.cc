// The forward pass against an independent, obviously-correct reference:
// every weight dequantized to double, plain loops, no batching, no cache
// tricks, hyperparameters read from the GGUF keys here rather than through
// HParams. Synthetic models from mkmodel: llama, qwen2 (QKV bias, NeoX),
// qwen3 (Q/K norm), mixtral (llama + experts), qwen3moe, and deepseek2 (MLA
// in the plain decompressed form, YaRN as DeepSeek's own code defines it,
// leading dense layers, shared expert, sigmoid or softmax gating with
// selection bias, group-limited routing, normalised and scaled weights),
// gpt-oss (Q/K/V/O biases, attention sinks, a sliding window on the
// even layers, YaRN's magnitude, router and expert biases, softmax over the
// chosen experts' logits, the clamped swiglu_oai), and glm4moe (Q/K/V
// biases, optional Q/K norms, RoPE on half of each head, DeepSeek-V3's
// routing and shared expert, the multi-token-prediction block skipped),
// gemma (scaled embeddings, GELU, the tied head), gemma2 (post-norms,
// soft-capped scores and logits, a window on the even layers) and gemma3
// (Q/K norms, a window on five layers in six with their own RoPE, linear
// scaling on the others).
#include <cmath>
#include <map>

#include "common/logging.h"
#include "daemon/kernels/dequantize.h"
#include "daemon/model/forward.h"
#include "daemon/tools/test_models.h"
#include "gtest/gtest.h"
#include "storage/env.h"
#include "tests/testdata.h"

namespace waste::model {
namespace {

using Vec = std::vector<double>;

// A reference implementation of the supported architectures.
class Reference {
 public:
  explicit Reference(const storage::GgufFile& gguf) : gguf_(gguf) {
    auto file = storage::Env::Default()->NewRandomAccessFile(gguf.path());
    WCHECK(file.ok());
    file_ = *std::move(file);
    arch_ = *gguf.GetString("general.architecture");
    // glm4moe: the multi-token-prediction blocks at the end are not run.
    n_layer_ = Int("block_count", 0) - Int("nextn_predict_layers", 0);
    n_head_ = Int("attention.head_count", 0);
    n_head_kv_ = Int("attention.head_count_kv", n_head_);
    head_dim_ = Int("attention.key_length", Int("embedding_length", 0) / n_head_);
    eps_ = Float("attention.layer_norm_rms_epsilon", 1e-5);
    n_rot_ = Int("rope.dimension_count", head_dim_);
    base_ = Float("rope.freq_base", 10000);
    neox_ = arch_ != "llama" && arch_ != "deepseek2";
    n_used_ = Int("expert_used_count", 0);
    dense_lead_ = Int("leading_dense_block_count", 0);
    sigmoid_ = Int("expert_gating_func", arch_ == "glm4moe" ? 2 : 1) == 2;
    norm_w_ = arch_ == "llama" || arch_ == "qwen3moe" ||
              gguf.GetBool(arch_ + ".expert_weights_norm").value_or(false);
    scale_w_ = Float("expert_weights_scale", 0);
    n_group_ = Int("expert_group_count", 0);
    n_group_used_ = Int("expert_group_used_count", 0);
    if (arch_ == "gpt-oss") {
      window_ = Int("attention.sliding_window", 0);
      factor_ = Float("rope.scaling.factor", 1);
      orig_ctx_ = Int("rope.scaling.original_context_length", 0);
      // YaRN's attention factor, on cos and sin: on both q and k.
      const double mscale = factor_ <= 1 ? 1.0 : 0.1 * std::log(factor_) + 1;
      kq_scale_ = mscale * mscale / std::sqrt(static_cast<double>(head_dim_));
    }
    if (arch_ == "gemma" || arch_ == "gemma2" || arch_ == "gemma3") {
      // As Google's gemma_pytorch: embeddings times sqrt(dim), query scale
      // 1/sqrt(head_dim) (query_pre_attn_scalar = head_dim in these sizes),
      // GELU (tanh); 2 and 3 norm each block's output; 2 soft-caps scores
      // and logits and windows every other layer; 3 windows five layers in
      // six, which rotate with base 10000 unscaled, the others with the
      // file's base and linear scaling.
      gemma_ = true;
      embd_scale_ = std::sqrt(static_cast<double>(Int("embedding_length", 0)));
      kq_scale_ = 1 / std::sqrt(static_cast<double>(head_dim_));
      attn_cap_ = Float("attn_logit_softcapping", arch_ == "gemma2" ? 50 : 0);
      final_cap_ = Float("final_logit_softcapping", arch_ == "gemma2" ? 30 : 0);
      window_ = Int("attention.sliding_window", 0);
      window_period_ = arch_ == "gemma3" ? 6 : 2;
      if (gguf.GetString(arch_ + ".rope.scaling.type").value_or("") == "linear") {
        linear_ = Float("rope.scaling.factor", 1);
      }
    }
    if (arch_ == "deepseek2") {
      kv_lora_ = Int("attention.kv_lora_rank", 0);
      // Files from before llama.cpp's split have one attn_kv_b and give
      // the per-head lengths as key_length / value_length.
      fused_ = Has("blk.0.attn_kv_b.weight");
      qk_head_ = fused_ ? head_dim_ : Int("attention.key_length_mla", 0);
      v_head_ = Int(fused_ ? "attention.value_length" : "attention.value_length_mla", 0);
      nope_ = qk_head_ - n_rot_;
      // DeepSeek's modeling code: softmax_scale = mscale(factor,
      // mscale_all_dims)^2 / sqrt(qk_head); cos/sin scaled by
      // mscale(factor, mscale) / mscale(factor, mscale_all_dims), with
      // mscale = mscale_all_dims in the released configs.
      factor_ = Float("rope.scaling.factor", 1);
      const double all_dims = Float("rope.scaling.yarn_log_multiplier", 0) / 0.1;
      auto mscale = [&](double m) { return factor_ <= 1 ? 1.0 : 0.1 * m * std::log(factor_) + 1; };
      kq_scale_ = std::pow(mscale(all_dims), 2) / std::sqrt(static_cast<double>(qk_head_));
      orig_ctx_ = Int("rope.scaling.original_context_length", 0);
    }
  }

  // Logits after feeding `token` at the next position.
  Vec Step(int32_t token) {
    Vec x = Row("token_embd.weight", token);
    if (gemma_) {
      for (double& v : x) v *= embd_scale_;
    }
    // Gemma 2/3 norm a block's output before adding it.
    auto add_block = [&](const Vec& y, const std::string& post_norm) {
      AddTo(&x, gemma_ && arch_ != "gemma" ? Norm(y, Tensor(post_norm)) : y);
    };
    for (int64_t l = 0; l < n_layer_; ++l) {
      std::string p = "blk." + std::to_string(l) + ".";
      Vec xn = Norm(x, Tensor(p + "attn_norm.weight"));
      add_block(arch_ == "deepseek2" ? Mla(l, p, xn) : Mha(l, p, xn),
                p + "post_attention_norm.weight");
      const bool post = arch_ == "gpt-oss" || arch_ == "glm4moe";
      xn = Norm(x, Tensor(p + (post ? "post_attention_norm.weight" : "ffn_norm.weight")));
      add_block(Has(p + "ffn_gate_inp.weight") ? Moe(p, xn) : Ffn(p, "", xn, -1),
                p + "post_ffw_norm.weight");
    }
    ++pos_;
    Vec xn = Norm(x, Tensor("output_norm.weight"));
    Vec logits = MatVec(Has("output.weight") ? "output.weight" : "token_embd.weight", xn);
    if (final_cap_ > 0) {
      for (double& v : logits) v = final_cap_ * std::tanh(v / final_cap_);
    }
    return logits;
  }

 private:
  int64_t Int(const std::string& key, int64_t fallback) const {
    return gguf_.GetInt(arch_ + "." + key).value_or(fallback);
  }
  double Float(const std::string& key, double fallback) const {
    return gguf_.GetFloat(arch_ + "." + key).value_or(fallback);
  }
  bool Has(const std::string& name) const { return gguf_.FindTensor(name) != nullptr; }

  // Row `r` of a tensor (rows counted across all of its matrices).
  Vec Row(const std::string& name, int64_t r) {
    const storage::TensorInfo* t = gguf_.FindTensor(name);
    WCHECK(t != nullptr) << name;
    int64_t cols = t->shape[0];
    uint64_t row_bytes = t->size / t->NumRows();
    std::string bytes(row_bytes, '\0');
    WCHECK(file_->Read(t->offset + r * row_bytes, row_bytes, bytes.data()).ok());
    std::vector<float> f(cols);
    kernels::DequantizeRow(static_cast<kernels::WeightType>(t->type), bytes.data(), f.data(), cols);
    return Vec(f.begin(), f.end());
  }
  Vec Tensor(const std::string& name) { return Row(name, 0); }

  // Matrix `m` of `name` (rows shape[1]) times x.
  Vec MatVec(const std::string& name, const Vec& x, int64_t m = 0) {
    int64_t rows = gguf_.FindTensor(name)->shape[1];
    Vec y(rows);
    for (int64_t r = 0; r < rows; ++r) y[r] = Dot(Row(name, m * rows + r), x);
    return y;
  }
  static double Dot(const Vec& a, const Vec& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
  }

  Vec Norm(const Vec& x, const Vec& w) const {
    double ss = 0;
    for (double v : x) ss += v * v;
    double scale = 1 / std::sqrt(ss / x.size() + eps_);
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w[i];
    return y;
  }

  static void AddTo(Vec* x, const Vec& y) {
    for (size_t i = 0; i < x->size(); ++i) (*x)[i] += y[i];
  }

  static void Softmax(Vec* v) {
    double max = *std::max_element(v->begin(), v->end()), sum = 0;
    for (double& s : *v) sum += (s = std::exp(s - max));
    for (double& s : *v) s /= sum;
  }

  // Rotates the first n_rot dims of `head` at the current position; YaRN
  // frequencies as DeepSeek's yarn rotary embedding computes them.
  // Gemma 3's windowed layers (`windowed`): base 10000, no linear scaling.
  void Rope(double* head, bool windowed = false) const {
    const bool local = windowed && arch_ == "gemma3";
    for (int64_t i = 0; i < n_rot_ / 2; ++i) {
      double freq = std::pow(local ? 10000.0 : base_, -2.0 * i / n_rot_) / (local ? 1 : linear_);
      if (factor_ > 1) {
        auto corr = [&](double rot) {
          return n_rot_ * std::log(orig_ctx_ / (rot * 2 * M_PI)) / (2 * std::log(base_));
        };
        double low = std::max(0.0, std::floor(corr(32))),
               high = std::min(n_rot_ - 1.0, std::ceil(corr(1)));
        if (low == high) high += 0.001;
        double mask = 1 - std::clamp((i - low) / (high - low), 0.0, 1.0);
        freq = freq / factor_ * (1 - mask) + freq * mask;
      }
      double theta = pos_ * freq;
      int64_t a = neox_ ? i : 2 * i, b = neox_ ? i + n_rot_ / 2 : 2 * i + 1;
      double x0 = head[a], x1 = head[b];
      head[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
      head[b] = x0 * std::sin(theta) + x1 * std::cos(theta);
    }
  }

  // Causal softmax attention of one head over `keys`, mixing `values`; a
  // sink logit joins the softmax and mixes nothing.
  static Vec Attend(const std::vector<double>& scores_in, const std::vector<Vec>& values,
                    double sink = -INFINITY) {
    Vec scores = scores_in;
    scores.push_back(sink);
    Softmax(&scores);
    Vec out(values[0].size(), 0.0);
    for (size_t t = 0; t < values.size(); ++t) {
      for (size_t i = 0; i < out.size(); ++i) out[i] += scores[t] * values[t][i];
    }
    return out;
  }

  Vec Mha(int64_t l, const std::string& p, const Vec& xn) {
    const int64_t hd = head_dim_;
    Vec q = MatVec(p + "attn_q.weight", xn), k = MatVec(p + "attn_k.weight", xn),
        v = MatVec(p + "attn_v.weight", xn);
    if (Has(p + "attn_q.bias")) {
      AddTo(&q, Tensor(p + "attn_q.bias"));
      AddTo(&k, Tensor(p + "attn_k.bias"));
      AddTo(&v, Tensor(p + "attn_v.bias"));
    }
    // Windowed layers see the last window_ positions, this one's included:
    // gpt-oss's and gemma2's even layers, gemma3's five in six.
    const bool windowed = window_ > 0 && l % window_period_ < window_period_ - 1;
    auto head = [&](Vec* t, int64_t h, const std::string& norm) {
      if (Has(norm)) {
        Vec n = Norm(Vec(t->begin() + h * hd, t->begin() + (h + 1) * hd), Tensor(norm));
        std::copy(n.begin(), n.end(), t->begin() + h * hd);
      }
      Rope(t->data() + h * hd, windowed);
    };
    for (int64_t h = 0; h < n_head_; ++h) head(&q, h, p + "attn_q_norm.weight");
    for (int64_t h = 0; h < n_head_kv_; ++h) head(&k, h, p + "attn_k_norm.weight");
    keys_[l].push_back(k);
    values_[l].push_back(v);
    Vec out;
    const Vec sinks = Has(p + "attn_sinks.weight") ? Tensor(p + "attn_sinks.weight") : Vec();
    const size_t n_pos = keys_[l].size();
    const size_t first = windowed && n_pos > static_cast<size_t>(window_) ? n_pos - window_ : 0;
    for (int64_t h = 0; h < n_head_; ++h) {
      int64_t g = h / (n_head_ / n_head_kv_);
      std::vector<double> scores;
      std::vector<Vec> vals;
      for (size_t t = first; t < n_pos; ++t) {
        double s = 0;
        for (int64_t i = 0; i < hd; ++i) s += q[h * hd + i] * keys_[l][t][g * hd + i];
        s = kq_scale_ != 0 ? s * kq_scale_ : s / std::sqrt(static_cast<double>(hd));
        scores.push_back(attn_cap_ > 0 ? attn_cap_ * std::tanh(s / attn_cap_) : s);
        vals.emplace_back(values_[l][t].begin() + g * hd, values_[l][t].begin() + (g + 1) * hd);
      }
      Vec o = Attend(scores, vals, sinks.empty() ? -INFINITY : sinks[h]);
      out.insert(out.end(), o.begin(), o.end());
    }
    Vec y = MatVec(p + "attn_output.weight", out);
    if (Has(p + "attn_output.bias")) AddTo(&y, Tensor(p + "attn_output.bias"));
    return y;
  }

  // MLA decompressed: per head full keys [W_k_b^T c | k_pe] and values W_v_b c.
  Vec Mla(int64_t l, const std::string& p, const Vec& xn) {
    Vec q = Has(p + "attn_q_a.weight")
                ? MatVec(p + "attn_q_b.weight", Norm(MatVec(p + "attn_q_a.weight", xn),
                                                     Tensor(p + "attn_q_a_norm.weight")))
                : MatVec(p + "attn_q.weight", xn);
    Vec kv = MatVec(p + "attn_kv_a_mqa.weight", xn);
    Vec c = Norm(Vec(kv.begin(), kv.begin() + kv_lora_), Tensor(p + "attn_kv_a_norm.weight"));
    Vec k_pe(kv.begin() + kv_lora_, kv.end());
    Rope(k_pe.data());
    keys_[l].push_back(k_pe);
    values_[l].push_back(c);  // The latent.
    Vec out;
    for (int64_t h = 0; h < n_head_; ++h) {
      double* qh = q.data() + h * qk_head_;
      Rope(qh + nope_);
      std::vector<double> scores;
      std::vector<Vec> vals;
      for (size_t t = 0; t < keys_[l].size(); ++t) {
        const Vec& ct = values_[l][t];
        double s = 0;
        for (int64_t j = 0; j < nope_; ++j) {
          double k_nope = 0;  // (W_k_b,h^T c)[j]
          if (fused_) {
            k_nope = Dot(KvB(p, h * (nope_ + v_head_) + j), ct);
          } else {
            for (int64_t r = 0; r < kv_lora_; ++r) k_nope += K_b(p, h, r)[j] * ct[r];
          }
          s += qh[j] * k_nope;
        }
        for (int64_t j = 0; j < n_rot_; ++j) s += qh[nope_ + j] * keys_[l][t][j];
        scores.push_back(s * kq_scale_);
        if (fused_) {
          Vec v(v_head_);
          for (int64_t i = 0; i < v_head_; ++i) {
            v[i] = Dot(KvB(p, h * (nope_ + v_head_) + nope_ + i), ct);
          }
          vals.push_back(v);
        } else {
          vals.push_back(MatVec(p + "attn_v_b.weight", ct, h));
        }
      }
      Vec o = Attend(scores, vals);
      out.insert(out.end(), o.begin(), o.end());
    }
    return MatVec(p + "attn_output.weight", out);
  }
  // Row r of a fused attn_kv_b: per head its key rows, then its value rows.
  const Vec& KvB(const std::string& p, int64_t r) {
    auto key = std::make_tuple(p, int64_t{-1}, r);
    auto it = k_b_.find(key);
    if (it == k_b_.end()) it = k_b_.emplace(key, Row(p + "attn_kv_b.weight", r)).first;
    return it->second;
  }
  const Vec& K_b(const std::string& p, int64_t h, int64_t r) {
    auto key = std::make_tuple(p, h, r);
    auto it = k_b_.find(key);
    if (it == k_b_.end())
      it = k_b_.emplace(key, Row(p + "attn_k_b.weight", h * kv_lora_ + r)).first;
    return it->second;
  }

  // SwiGLU FFN of `p`ffn_{gate,up,down}`suffix`, or of expert e (>= 0).
  Vec Ffn(const std::string& p, const std::string& suffix, const Vec& xn, int64_t e) {
    const std::string s = e >= 0 ? "_exps" : suffix;
    const int64_t m = std::max<int64_t>(e, 0);
    Vec gate = MatVec(p + "ffn_gate" + s + ".weight", xn, m),
        up = MatVec(p + "ffn_up" + s + ".weight", xn, m);
    const bool biases = e >= 0 && Has(p + "ffn_gate_exps.bias");  // gpt-oss
    if (biases) {
      AddTo(&gate, Row(p + "ffn_gate_exps.bias", e));
      AddTo(&up, Row(p + "ffn_up_exps.bias", e));
    }
    for (size_t i = 0; i < gate.size(); ++i) {
      if (arch_ == "gpt-oss") {  // swiglu_oai: alpha 1.702, limit 7.
        const double g = std::min(gate[i], 7.0), u = std::clamp(up[i], -7.0, 7.0);
        gate[i] = g / (1 + std::exp(-1.702 * g)) * (u + 1);
      } else if (gemma_) {  // GELU, tanh form.
        const double g = gate[i];
        gate[i] =
            0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g))) * up[i];
      } else {
        gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
      }
    }
    Vec y = MatVec(p + "ffn_down" + s + ".weight", gate, m);
    if (biases) AddTo(&y, Row(p + "ffn_down_exps.bias", e));
    return y;
  }

  Vec Moe(const std::string& p, const Vec& xn) {
    Vec probs = MatVec(p + "ffn_gate_inp.weight", xn);
    const int64_t n = probs.size();
    const bool chosen_softmax = arch_ == "gpt-oss";
    if (Has(p + "ffn_gate_inp.bias")) AddTo(&probs, Tensor(p + "ffn_gate_inp.bias"));
    if (chosen_softmax) {
      // The logits choose; their softmax over the chosen weighs (below).
    } else if (sigmoid_) {
      for (double& v : probs) v = 1 / (1 + std::exp(-v));
    } else {
      Softmax(&probs);
    }
    Vec select = probs;
    if (Has(p + "exp_probs_b.bias")) AddTo(&select, Tensor(p + "exp_probs_b.bias"));
    if (n_group_ > 1) {  // Keep the groups with the best top-2 sums.
      const int64_t per = n / n_group_;
      std::vector<std::pair<double, int64_t>> groups;
      for (int64_t g = 0; g < n_group_; ++g) {
        Vec s(select.begin() + g * per, select.begin() + (g + 1) * per);
        std::sort(s.rbegin(), s.rend());
        groups.push_back({s[0] + s[1], g});
      }
      std::sort(groups.rbegin(), groups.rend());
      for (size_t i = n_group_used_; i < groups.size(); ++i) {
        for (int64_t e = 0; e < per; ++e) select[groups[i].second * per + e] = -INFINITY;
      }
    }
    std::vector<std::pair<double, int64_t>> ranked;
    for (int64_t e = 0; e < n; ++e) ranked.push_back({select[e], -e});
    std::sort(ranked.rbegin(), ranked.rend());
    if (chosen_softmax) {
      Vec chosen;
      for (int64_t k = 0; k < n_used_; ++k) chosen.push_back(probs[-ranked[k].second]);
      Softmax(&chosen);
      for (int64_t k = 0; k < n_used_; ++k) probs[-ranked[k].second] = chosen[k];
    }
    double sum = 0;
    for (int64_t k = 0; k < n_used_; ++k) sum += probs[-ranked[k].second];
    Vec y(xn.size(), 0.0);
    for (int64_t k = 0; k < n_used_; ++k) {
      int64_t e = -ranked[k].second;
      double w = probs[e];
      if (norm_w_) w /= sum;
      if (scale_w_ != 0) w *= scale_w_;
      Vec out = Ffn(p, "", xn, e);
      for (size_t i = 0; i < y.size(); ++i) y[i] += w * out[i];
    }
    if (Has(p + "ffn_gate_shexp.weight")) {
      Vec shared = Ffn(p, "_shexp", xn, -1);
      double gate = 1;
      if (Has(p + "ffn_gate_inp_shexp.weight")) {
        gate = 1 / (1 + std::exp(-Dot(Tensor(p + "ffn_gate_inp_shexp.weight"), xn)));
      }
      for (size_t i = 0; i < y.size(); ++i) y[i] += gate * shared[i];
    }
    return y;
  }

  const storage::GgufFile& gguf_;
  std::unique_ptr<storage::RandomAccessFile> file_;
  std::string arch_;
  int64_t n_layer_, n_head_, n_head_kv_, head_dim_, n_rot_;
  double eps_, base_;
  bool neox_;
  int64_t n_used_, dense_lead_, n_group_, n_group_used_;
  bool sigmoid_, norm_w_;
  double scale_w_;
  int64_t kv_lora_ = 0, qk_head_ = 0, v_head_ = 0, nope_ = 0, orig_ctx_ = 0, window_ = 0;
  bool fused_ = false;
  double factor_ = 1, kq_scale_ = 0;
  // Gemma.
  bool gemma_ = false;
  int64_t window_period_ = 2;
  double embd_scale_ = 1, attn_cap_ = 0, final_cap_ = 0, linear_ = 1;
  std::map<int64_t, std::vector<Vec>> keys_, values_;
  std::map<std::tuple<std::string, int64_t, int64_t>, Vec> k_b_;
  int64_t pos_ = 0;
};

struct Case {
  const char* name;
  tools::SyntheticArch arch;
  storage::GgmlType type;
  double tolerance;  // Relative to the logits' scale.
  int64_t q_lora_rank = -1;
  tools::testing::MetadataOverrides overrides = {};
  bool mla_fused = false;
  bool qk_norm = true;  // glm4moe
};

class ReferenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(ReferenceTest, LogitsMatchTheReferenceForEightSteps) {
  const Case& c = GetParam();
  tools::MkModelOptions options;
  options.arch = c.arch;
  options.out = ::testing::TempDir() + "/" + c.name + ".gguf";
  options.dim = 128;
  options.layers = 2;
  options.heads = 4;
  options.kv_heads = 2;
  options.ffn = 256;
  options.vocab = 320;
  options.type = c.type;
  options.seed = 7;
  if (c.arch == tools::SyntheticArch::kMixtral || c.arch == tools::SyntheticArch::kQwen3Moe ||
      c.arch == tools::SyntheticArch::kDeepseek2 || c.arch == tools::SyntheticArch::kGptOss ||
      c.arch == tools::SyntheticArch::kGlm4Moe) {
    options.layers = 3;
    options.experts = 8;
    options.experts_used = 3;
    options.expert_ffn = 64;
  }
  if (c.arch == tools::SyntheticArch::kDeepseek2) {
    options.kv_heads = 0;
    options.head_dim = 32;  // qk_nope and v head dims.
    options.rope_dim = 16;
    options.kv_lora_rank = 64;
    options.q_lora_rank = c.q_lora_rank;
    options.mla_fused = c.mla_fused;
    options.ctx = 16384;  // > 4096: YaRN with factor 4.
  }
  if (c.arch == tools::SyntheticArch::kGptOss) {
    options.head_dim = 48;       // heads * head_dim != dim: key_length.
    options.sliding_window = 3;  // Eight steps go past it.
    options.ctx = 16384;         // > 4096: YaRN with factor 4.
  }
  if (c.arch == tools::SyntheticArch::kGlm4Moe) {
    options.head_dim = 48;  // heads * head_dim != dim; RoPE on 24 of the 48.
    options.qk_norm = c.qk_norm;
  }
  if (c.arch == tools::SyntheticArch::kGemma2 || c.arch == tools::SyntheticArch::kGemma3) {
    options.sliding_window = 3;  // Eight steps go past it.
    // gemma3: layers 0-4 windowed (their own RoPE), 5 global (scaled 8x).
    if (c.arch == tools::SyntheticArch::kGemma3) options.layers = 6;
  }
  auto written = tools::testing::WriteModel(options, c.overrides);
  ASSERT_TRUE(written.ok()) << written;
  auto loaded = tools::testing::LoadModel(options.out);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Model& model = *loaded->model;
  kernels::ThreadPool pool(2);
  SequenceState state(model, 64, kernels::ops::KvType::kF32);
  Forward forward(&model, loaded->store.get(), &pool);
  Reference reference(*loaded->gguf);
  std::vector<float> logits(model.hparams().n_vocab);
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

using storage::GgmlType;
using storage::GgufValue;
using tools::SyntheticArch;

INSTANTIATE_TEST_SUITE_P(
    Architectures, ReferenceTest,
    ::testing::Values(Case{"llama_f32", SyntheticArch::kLlama, GgmlType::kF32, 1e-4},
                      Case{"qwen2_f32", SyntheticArch::kQwen2, GgmlType::kF32, 1e-4},
                      Case{"qwen3_f32", SyntheticArch::kQwen3, GgmlType::kF32, 1e-4},
                      Case{"qwen3_q8_0", SyntheticArch::kQwen3, GgmlType::kQ8_0, 2e-2},
                      Case{"llama_q4_k", SyntheticArch::kLlama, GgmlType::kQ4_K, 5e-2},
                      Case{"mixtral_f32", SyntheticArch::kMixtral, GgmlType::kF32, 1e-4},
                      Case{"mixtral_q8_0", SyntheticArch::kMixtral, GgmlType::kQ8_0, 2e-2},
                      Case{"qwen3moe_f32", SyntheticArch::kQwen3Moe, GgmlType::kF32, 1e-4},
                      Case{"qwen3moe_q4_0", SyntheticArch::kQwen3Moe, GgmlType::kQ4_0, 5e-2},
                      Case{"gpt_oss_f32", SyntheticArch::kGptOss, GgmlType::kF32, 1e-4},
                      Case{"gemma_f32", SyntheticArch::kGemma, GgmlType::kF32, 1e-4},
                      Case{"gemma2_f32", SyntheticArch::kGemma2, GgmlType::kF32, 1e-4},
                      Case{"gemma3_f32", SyntheticArch::kGemma3, GgmlType::kF32, 1e-4},
                      // Six layers of int8 activations: as deepseek2_q8_0.
                      Case{"gemma3_q8_0", SyntheticArch::kGemma3, GgmlType::kQ8_0, 5e-2},
                      // GLM-4.5's form (Q/K norms), then -Air's (none).
                      Case{"glm4moe_f32", SyntheticArch::kGlm4Moe, GgmlType::kF32, 1e-4},
                      Case{"glm4moe_air_f32",
                           SyntheticArch::kGlm4Moe,
                           GgmlType::kF32,
                           1e-4,
                           -1,
                           {},
                           false,
                           /*qk_norm=*/false},
                      Case{"glm4moe_q8_0",
                           SyntheticArch::kGlm4Moe,
                           GgmlType::kQ8_0,
                           5e-2,
                           -1,
                           {{"glm4moe.expert_used_count", GgufValue::Uint32(8)}}},
                      // Sigmoid gating, bias, normalised weights scaled by 2.5, YaRN.
                      Case{"deepseek2_f32", SyntheticArch::kDeepseek2, GgmlType::kF32, 1e-4},
                      Case{"deepseek2_q8_0", SyntheticArch::kDeepseek2, GgmlType::kQ8_0, 5e-2},
                      // DeepSeek-V2-Lite's shape: attn_q, softmax gating, no norm.
                      Case{"deepseek2_lite_f32",
                           SyntheticArch::kDeepseek2,
                           GgmlType::kF32,
                           1e-4,
                           0,
                           {{"deepseek2.expert_gating_func", GgufValue::Uint32(1)},
                            {"deepseek2.expert_weights_norm", GgufValue::Bool(false)},
                            {"deepseek2.rope.scaling.yarn_log_multiplier",
                             GgufValue::Float32(0.0707f)}}},
                      // DeepSeek-V3's group-limited routing: 4 groups of 2, best 2 kept.
                      Case{"deepseek2_groups_f32",
                           SyntheticArch::kDeepseek2,
                           GgmlType::kF32,
                           1e-4,
                           -1,
                           {{"deepseek2.expert_group_count", GgufValue::Uint32(4)},
                            {"deepseek2.expert_group_used_count", GgufValue::Uint32(2)}}},
                      // Converted before llama.cpp's MLA split: one attn_kv_b.
                      Case{"deepseek2_fused_f32",
                           SyntheticArch::kDeepseek2,
                           GgmlType::kF32,
                           1e-4,
                           -1,
                           {},
                           /*mla_fused=*/true},
                      // Every expert used: no near-tie in routing to flip
                      // with the activations' rounding.
                      Case{"deepseek2_fused_q8_0",
                           SyntheticArch::kDeepseek2,
                           GgmlType::kQ8_0,
                           5e-2,
                           -1,
                           {{"deepseek2.expert_used_count", GgufValue::Uint32(8)}},
                           /*mla_fused=*/true}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace waste::model
