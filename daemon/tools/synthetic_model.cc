#include "daemon/tools/synthetic_model.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace waste::tools {
namespace {

using storage::GgmlType;
using storage::GgufValue;

bool IsKQuant(GgmlType type) { return storage::GetGgmlTypeTraits(type).block_size == 256; }

bool IsMoe(SyntheticArch arch) {
  return arch == SyntheticArch::kMixtral || arch == SyntheticArch::kQwen3Moe ||
         arch == SyntheticArch::kDeepseek2 || arch == SyntheticArch::kGptOss ||
         arch == SyntheticArch::kGlm4Moe;
}

// Leading dense blocks, a shared expert and a selection bias: DeepSeek's
// MoE shape, which GLM-4.5 shares.
bool HasDeepseekMoe(SyntheticArch arch) {
  return arch == SyntheticArch::kDeepseek2 || arch == SyntheticArch::kGlm4Moe;
}

// glm4moe's multi-token-prediction blocks after the model's own.
int64_t NextnBlocks(SyntheticArch arch) { return arch == SyntheticArch::kGlm4Moe ? 1 : 0; }

bool IsGemma(SyntheticArch arch) {
  return arch == SyntheticArch::kGemma || arch == SyntheticArch::kGemma2 ||
         arch == SyntheticArch::kGemma3;
}

// Architectures with a sliding window on some layers.
bool HasWindow(SyntheticArch arch) {
  return arch == SyntheticArch::kGptOss || arch == SyntheticArch::kGemma2 ||
         arch == SyntheticArch::kGemma3;
}

int64_t RoundUp(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

absl::Status Positive(const char* flag, int64_t value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be positive, got ", value));
}

// Builds the tensor list and metadata of one model.
class SpecBuilder {
 public:
  explicit SpecBuilder(const MkModelOptions& o) : o_(o) {}

  ModelSpec Build();

 private:
  std::string Key(std::string_view suffix) const {
    return absl::StrCat(spec_.arch, ".", std::string(suffix));
  }
  void U32(std::string_view suffix, int64_t v) {
    spec_.metadata.emplace_back(Key(suffix), GgufValue::Uint32(static_cast<uint32_t>(v)));
  }
  void F32(std::string_view suffix, float v) {
    spec_.metadata.emplace_back(Key(suffix), GgufValue::Float32(v));
  }
  std::string Blk(int64_t layer, std::string_view name) const {
    return absl::StrCat("blk.", layer, ".", std::string(name));
  }
  // A matrix (2-D or 3-D) in the requested type, ~normal(0, 1/sqrt(ne0)):
  // y = W x sums ne0 products, so outputs keep the inputs' scale.
  void Matrix(std::string name, std::vector<int64_t> shape, float scale = 0) {
    const int64_t ne0 = shape[0];
    if (scale == 0) scale = 1.0f / std::sqrt(static_cast<float>(ne0));
    spec_.tensors.push_back(
        {std::move(name), std::move(shape), MatrixType(o_.type, ne0), WeightInit::kNormal, scale});
  }
  // F32: norms (ones), biases and router weights (small random).
  void Norm(std::string name, int64_t n) {
    spec_.tensors.push_back({std::move(name), {n}, GgmlType::kF32, WeightInit::kOnes, 1});
  }
  void F32Tensor(std::string name, std::vector<int64_t> shape, float scale) {
    spec_.tensors.push_back(
        {std::move(name), std::move(shape), GgmlType::kF32, WeightInit::kNormal, scale});
  }

  void Metadata();
  void Attention(int64_t layer);
  void MlaAttention(int64_t layer);
  void Ffn(int64_t layer);

  const MkModelOptions& o_;
  ModelSpec spec_;
};

void SpecBuilder::Metadata() {
  auto& md = spec_.metadata;
  md.emplace_back("general.architecture", GgufValue::String(spec_.arch));
  md.emplace_back("general.name", GgufValue::String(absl::StrCat("waste synthetic ",
                                                                 SyntheticArchFlagName(o_.arch))));
  md.emplace_back("general.file_type", GgufValue::Uint32(FileTypeFor(o_.type)));
  md.emplace_back("general.quantization_version", GgufValue::Uint32(2));
  U32("vocab_size", o_.vocab);
  U32("context_length", o_.ctx);
  U32("embedding_length", o_.dim);
  U32("block_count", o_.layers + NextnBlocks(o_.arch));
  U32("feed_forward_length", o_.arch == SyntheticArch::kMixtral ? o_.expert_ffn : o_.ffn);
  U32("attention.head_count", o_.heads);
  F32("attention.layer_norm_rms_epsilon", 1e-6f);
  const bool qwen = o_.arch == SyntheticArch::kQwen2 || o_.arch == SyntheticArch::kQwen3 ||
                    o_.arch == SyntheticArch::kQwen3Moe || o_.arch == SyntheticArch::kMixtral;
  const bool gpt_oss = o_.arch == SyntheticArch::kGptOss;
  const bool glm = o_.arch == SyntheticArch::kGlm4Moe;
  const bool gemma3 = o_.arch == SyntheticArch::kGemma3;
  F32("rope.freq_base", qwen || glm || gemma3 ? 1000000.0f : gpt_oss ? 150000.0f : 10000.0f);

  if (o_.arch == SyntheticArch::kDeepseek2) {
    U32("rope.dimension_count", o_.rope_dim);
    // llama.cpp requires q_lora_rank of every deepseek2 but the 27-layer
    // Lite (0 here: attn_q instead of attn_q_a/attn_q_b).
    U32("attention.q_lora_rank", o_.q_lora_rank);
    U32("attention.kv_lora_rank", o_.kv_lora_rank);
    if (o_.mla_fused) {
      // As before the split: attention as MHA after decompression, per head.
      U32("attention.head_count_kv", o_.heads);
      U32("attention.key_length", o_.head_dim + o_.rope_dim);
      U32("attention.value_length", o_.head_dim);
    } else {
      // MLA is stored as MQA over the latent (convert_hf_to_gguf.py): one
      // KV head of key_length = kv_lora_rank + rope dims; the *_mla lengths
      // are the per-head sizes after decompression through attn_k_b / attn_v_b.
      U32("attention.head_count_kv", 1);
      U32("attention.key_length", o_.kv_lora_rank + o_.rope_dim);
      U32("attention.value_length", o_.kv_lora_rank);
      U32("attention.key_length_mla", o_.head_dim + o_.rope_dim);
      U32("attention.value_length_mla", o_.head_dim);
    }
    U32("leading_dense_block_count", o_.dense_layers);
    U32("expert_feed_forward_length", o_.expert_ffn);
    U32("expert_count", o_.experts);
    U32("expert_used_count", o_.experts_used);
    U32("expert_shared_count", o_.shared_experts);
    F32("expert_weights_scale", 2.5f);
    md.emplace_back(Key("expert_weights_norm"), GgufValue::Bool(true));
    U32("expert_gating_func", 2);  // LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID (V3).
    constexpr int64_t kOriginalContext = 4096;
    if (o_.ctx > kOriginalContext) {
      md.emplace_back(Key("rope.scaling.type"), GgufValue::String("yarn"));
      F32("rope.scaling.factor", static_cast<float>(o_.ctx) / kOriginalContext);
      U32("rope.scaling.original_context_length", kOriginalContext);
    }
    // Required by llama.cpp's deepseek2 loader even without YaRN (where it
    // changes nothing): 0.1 * mscale_all_dim, as convert_hf_to_gguf.py
    // writes DeepSeek-V3's.
    F32("rope.scaling.yarn_log_multiplier", 0.1f);
    return;
  }
  U32("attention.head_count_kv", o_.kv_heads);
  U32("rope.dimension_count", o_.rope_dim);
  const bool qwen3 = o_.arch == SyntheticArch::kQwen3 || o_.arch == SyntheticArch::kQwen3Moe;
  if (qwen3 || IsGemma(o_.arch) || o_.head_dim * o_.heads != o_.dim) {
    U32("attention.key_length", o_.head_dim);
    U32("attention.value_length", o_.head_dim);
  }
  if (IsMoe(o_.arch)) {
    U32("expert_count", o_.experts);
    U32("expert_used_count", o_.experts_used);
    if (o_.arch == SyntheticArch::kQwen3Moe || gpt_oss || glm) {
      U32("expert_feed_forward_length", o_.expert_ffn);
    }
  }
  if (glm) {  // GLM-4.5's routing: sigmoid, bias, normalised weights x 2.5.
    U32("leading_dense_block_count", o_.dense_layers);
    U32("expert_shared_count", o_.shared_experts);
    F32("expert_weights_scale", 2.5f);
    spec_.metadata.emplace_back(Key("expert_weights_norm"), GgufValue::Bool(true));
    U32("expert_gating_func", 2);
    U32("nextn_predict_layers", NextnBlocks(o_.arch));
  }
  if (HasWindow(o_.arch)) U32("attention.sliding_window", o_.sliding_window);
  if (o_.arch == SyntheticArch::kGemma2) {
    // Caps that bite on random weights' scores and logits (Gemma 2's own,
    // 50 and 30, would barely touch them).
    F32("attn_logit_softcapping", 5.0f);
    F32("final_logit_softcapping", 3.0f);
  }
  if (gemma3) {  // As the 4B-27B models: the global layers' RoPE stretched 8x.
    spec_.metadata.emplace_back(Key("rope.scaling.type"), GgufValue::String("linear"));
    F32("rope.scaling.factor", 8.0f);
  }
  if (gpt_oss) {
    // As gpt-oss's own: YaRN from a 4096-position original context.
    constexpr int64_t kOriginalContext = 4096;
    if (o_.ctx > kOriginalContext) {
      spec_.metadata.emplace_back(Key("rope.scaling.type"), GgufValue::String("yarn"));
      F32("rope.scaling.factor", static_cast<float>(o_.ctx) / kOriginalContext);
      U32("rope.scaling.original_context_length", kOriginalContext);
    }
  }
}

void SpecBuilder::Attention(int64_t layer) {
  const int64_t q_dim = o_.heads * o_.head_dim;
  const int64_t kv_dim = o_.kv_heads * o_.head_dim;
  Matrix(Blk(layer, "attn_q.weight"), {o_.dim, q_dim});
  Matrix(Blk(layer, "attn_k.weight"), {o_.dim, kv_dim});
  Matrix(Blk(layer, "attn_v.weight"), {o_.dim, kv_dim});
  const bool gpt_oss = o_.arch == SyntheticArch::kGptOss;
  const bool glm = o_.arch == SyntheticArch::kGlm4Moe;
  if (o_.arch == SyntheticArch::kQwen2 || gpt_oss || glm) {
    F32Tensor(Blk(layer, "attn_q.bias"), {q_dim}, 0.02f);
    F32Tensor(Blk(layer, "attn_k.bias"), {kv_dim}, 0.02f);
    F32Tensor(Blk(layer, "attn_v.bias"), {kv_dim}, 0.02f);
  }
  Matrix(Blk(layer, "attn_output.weight"), {q_dim, o_.dim});
  if (gpt_oss) {
    F32Tensor(Blk(layer, "attn_output.bias"), {o_.dim}, 0.02f);
    // Sink logits of the order of the scores, so they take a real share.
    F32Tensor(Blk(layer, "attn_sinks.weight"), {o_.heads}, 1.0f);
  }
  if (o_.arch == SyntheticArch::kQwen3 || o_.arch == SyntheticArch::kQwen3Moe ||
      o_.arch == SyntheticArch::kGemma3 || (glm && o_.qk_norm)) {
    Norm(Blk(layer, "attn_q_norm.weight"), o_.head_dim);
    Norm(Blk(layer, "attn_k_norm.weight"), o_.head_dim);
  }
}

void SpecBuilder::MlaAttention(int64_t layer) {
  const int64_t qk_head = o_.head_dim + o_.rope_dim;  // nope + rope
  if (o_.q_lora_rank > 0) {
    Matrix(Blk(layer, "attn_q_a.weight"), {o_.dim, o_.q_lora_rank});
    Norm(Blk(layer, "attn_q_a_norm.weight"), o_.q_lora_rank);
    Matrix(Blk(layer, "attn_q_b.weight"), {o_.q_lora_rank, o_.heads * qk_head});
  } else {
    Matrix(Blk(layer, "attn_q.weight"), {o_.dim, o_.heads * qk_head});
  }
  Matrix(Blk(layer, "attn_kv_a_mqa.weight"), {o_.dim, o_.kv_lora_rank + o_.rope_dim});
  Norm(Blk(layer, "attn_kv_a_norm.weight"), o_.kv_lora_rank);
  if (o_.mla_fused) {
    // Per head its key rows, then its value rows (qk_nope = v = head_dim).
    Matrix(Blk(layer, "attn_kv_b.weight"), {o_.kv_lora_rank, o_.heads * 2 * o_.head_dim});
  } else {
    // The split form current converters write (the absorbed MLA path).
    Matrix(Blk(layer, "attn_k_b.weight"), {o_.head_dim, o_.kv_lora_rank, o_.heads});
    Matrix(Blk(layer, "attn_v_b.weight"), {o_.kv_lora_rank, o_.head_dim, o_.heads});
  }
  Matrix(Blk(layer, "attn_output.weight"), {o_.heads * o_.head_dim, o_.dim});
}

void SpecBuilder::Ffn(int64_t layer) {
  const bool dense = !IsMoe(o_.arch) || (HasDeepseekMoe(o_.arch) && layer < o_.dense_layers);
  if (dense) {
    Matrix(Blk(layer, "ffn_gate.weight"), {o_.dim, o_.ffn});
    Matrix(Blk(layer, "ffn_up.weight"), {o_.dim, o_.ffn});
    Matrix(Blk(layer, "ffn_down.weight"), {o_.ffn, o_.dim});
    return;
  }
  const float router_scale = 1.0f / std::sqrt(static_cast<float>(o_.dim));
  F32Tensor(Blk(layer, "ffn_gate_inp.weight"), {o_.dim, o_.experts}, router_scale);
  if (HasDeepseekMoe(o_.arch)) F32Tensor(Blk(layer, "exp_probs_b.bias"), {o_.experts}, 0.02f);
  Matrix(Blk(layer, "ffn_gate_exps.weight"), {o_.dim, o_.expert_ffn, o_.experts});
  Matrix(Blk(layer, "ffn_up_exps.weight"), {o_.dim, o_.expert_ffn, o_.experts});
  Matrix(Blk(layer, "ffn_down_exps.weight"), {o_.expert_ffn, o_.dim, o_.experts});
  if (o_.arch == SyntheticArch::kGptOss) {
    // Gate biases of the order of the gate products, so the clamps at +-7
    // of swiglu_oai are reached by some units.
    F32Tensor(Blk(layer, "ffn_gate_inp.bias"), {o_.experts}, 0.5f);
    F32Tensor(Blk(layer, "ffn_gate_exps.bias"), {o_.expert_ffn, o_.experts}, 3.0f);
    F32Tensor(Blk(layer, "ffn_up_exps.bias"), {o_.expert_ffn, o_.experts}, 3.0f);
    F32Tensor(Blk(layer, "ffn_down_exps.bias"), {o_.dim, o_.experts}, 0.02f);
  }
  if (HasDeepseekMoe(o_.arch) && o_.shared_experts > 0) {
    const int64_t shared_ffn = o_.expert_ffn * o_.shared_experts;
    Matrix(Blk(layer, "ffn_gate_shexp.weight"), {o_.dim, shared_ffn});
    Matrix(Blk(layer, "ffn_up_shexp.weight"), {o_.dim, shared_ffn});
    Matrix(Blk(layer, "ffn_down_shexp.weight"), {shared_ffn, o_.dim});
  }
}

ModelSpec SpecBuilder::Build() {
  spec_.arch = o_.arch == SyntheticArch::kMixtral ? "llama" : SyntheticArchFlagName(o_.arch);
  Metadata();
  // Embedding rows ~normal(0, 1): the first RMS norm rescales them anyway.
  // Gemma's are scaled up by sqrt(dim) and read by the tied head: rows of
  // 1/sqrt(dim) give it unit activations and logits.
  const bool gemma = IsGemma(o_.arch);
  Matrix("token_embd.weight", {o_.dim, o_.vocab},
         gemma ? 1.0f / std::sqrt(static_cast<float>(o_.dim)) : 1.0f);
  const bool gemma_post = gemma && o_.arch != SyntheticArch::kGemma;
  const bool post_norm = o_.arch == SyntheticArch::kGptOss || o_.arch == SyntheticArch::kGlm4Moe;
  for (int64_t layer = 0; layer < o_.layers + NextnBlocks(o_.arch); ++layer) {
    Norm(Blk(layer, "attn_norm.weight"), o_.dim);
    if (o_.arch == SyntheticArch::kDeepseek2) {
      MlaAttention(layer);
    } else {
      Attention(layer);
    }
    if (gemma_post) Norm(Blk(layer, "post_attention_norm.weight"), o_.dim);
    Norm(Blk(layer, post_norm ? "post_attention_norm.weight" : "ffn_norm.weight"), o_.dim);
    Ffn(layer);
    if (gemma_post) Norm(Blk(layer, "post_ffw_norm.weight"), o_.dim);
    if (layer >= o_.layers) {  // A multi-token-prediction block's own tensors.
      Matrix(Blk(layer, "nextn.eh_proj.weight"), {2 * o_.dim, o_.dim});
      Norm(Blk(layer, "nextn.enorm.weight"), o_.dim);
      Norm(Blk(layer, "nextn.hnorm.weight"), o_.dim);
      Norm(Blk(layer, "nextn.shared_head_norm.weight"), o_.dim);
    }
  }
  Norm("output_norm.weight", o_.dim);
  if (!gemma) Matrix("output.weight", {o_.dim, o_.vocab});
  return std::move(spec_);
}

}  // namespace

bool ParseSyntheticArch(const std::string& name, SyntheticArch* arch) {
  for (SyntheticArch a :
       {SyntheticArch::kLlama, SyntheticArch::kQwen2, SyntheticArch::kQwen3,
        SyntheticArch::kMixtral, SyntheticArch::kQwen3Moe, SyntheticArch::kDeepseek2,
        SyntheticArch::kGptOss, SyntheticArch::kGlm4Moe, SyntheticArch::kGemma,
        SyntheticArch::kGemma2, SyntheticArch::kGemma3}) {
    if (name == SyntheticArchFlagName(a)) {
      *arch = a;
      return true;
    }
  }
  return false;
}

const char* SyntheticArchFlagName(SyntheticArch arch) {
  switch (arch) {
    case SyntheticArch::kLlama:
      return "llama";
    case SyntheticArch::kQwen2:
      return "qwen2";
    case SyntheticArch::kQwen3:
      return "qwen3";
    case SyntheticArch::kMixtral:
      return "mixtral";
    case SyntheticArch::kQwen3Moe:
      return "qwen3moe";
    case SyntheticArch::kDeepseek2:
      return "deepseek2";
    case SyntheticArch::kGptOss:
      return "gpt-oss";
    case SyntheticArch::kGlm4Moe:
      return "glm4moe";
    case SyntheticArch::kGemma:
      return "gemma";
    case SyntheticArch::kGemma2:
      return "gemma2";
    case SyntheticArch::kGemma3:
      return "gemma3";
  }
  return "llama";
}

GgmlType MatrixType(GgmlType requested, int64_t ne0) {
  if (IsKQuant(requested) && ne0 % 256 != 0) {
    switch (requested) {
      case GgmlType::kQ4_K:
        requested = GgmlType::kQ5_0;
        break;
      case GgmlType::kQ5_K:
        requested = GgmlType::kQ5_1;
        break;
      case GgmlType::kQ2_K:
      case GgmlType::kQ3_K:
      case GgmlType::kIQ4_XS:
      case GgmlType::kIQ3_S:
      case GgmlType::kIQ3_XXS:
      case GgmlType::kIQ2_S:
      case GgmlType::kIQ2_XS:
      case GgmlType::kIQ2_XXS:
      case GgmlType::kIQ1_M:
      case GgmlType::kIQ1_S:
        requested = GgmlType::kIQ4_NL;
        break;
      default:
        requested = GgmlType::kQ8_0;
        break;
    }
  }
  if (!storage::GgmlRowSize(requested, ne0).has_value()) return GgmlType::kF16;
  return requested;
}

uint32_t FileTypeFor(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return 0;  // LLAMA_FTYPE_ALL_F32
    case GgmlType::kF16:
      return 1;
    case GgmlType::kQ4_0:
      return 2;
    case GgmlType::kQ4_1:
      return 3;
    case GgmlType::kQ8_0:
      return 7;
    case GgmlType::kQ5_0:
      return 8;
    case GgmlType::kQ5_1:
      return 9;
    case GgmlType::kQ2_K:
      return 10;
    case GgmlType::kQ3_K:
      return 12;  // Q3_K_M
    case GgmlType::kIQ4_NL:
      return 25;
    case GgmlType::kIQ4_XS:
      return 30;
    case GgmlType::kIQ2_XXS:
      return 19;
    case GgmlType::kIQ2_XS:
      return 20;
    case GgmlType::kIQ3_XXS:
      return 23;
    case GgmlType::kIQ1_S:
      return 24;
    case GgmlType::kIQ3_S:
      return 26;
    case GgmlType::kIQ2_S:
      return 28;
    case GgmlType::kIQ1_M:
      return 31;
    case GgmlType::kQ4_K:
      return 15;  // Q4_K_M
    case GgmlType::kQ5_K:
      return 17;  // Q5_K_M
    case GgmlType::kQ6_K:
      return 18;
    case GgmlType::kBF16:
      return 32;
    case GgmlType::kMXFP4:
      return 38;  // MXFP4_MOE
    default:
      return 0;
  }
}

absl::StatusOr<MkModelOptions> ResolveOptions(const MkModelOptions& options, int64_t vocab) {
  MkModelOptions o = options;
  const bool moe = IsMoe(o.arch);
  const bool mla = o.arch == SyntheticArch::kDeepseek2;
  for (auto [flag, value] : {std::pair<const char*, int64_t>{"dim", o.dim},
                             {"layers", o.layers},
                             {"heads", o.heads},
                             {"ctx", o.ctx}}) {
    if (auto s = Positive(flag, value); !s.ok()) return s;
  }
  if (o.vocab == 0) o.vocab = vocab;
  if (o.vocab != vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("--vocab ", o.vocab, " does not match the tokenizer's ", vocab,
                     " tokens; leave --vocab out to use the tokenizer's size (at least ", vocab,
                     " with the built-in tokenizer)"));
  }
  if (o.kv_heads == 0) o.kv_heads = o.heads;
  if (o.kv_heads < 0 || o.heads % o.kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv-heads ", o.kv_heads, " must divide --heads ", o.heads));
  }
  if (o.head_dim == 0) {
    if (o.dim % o.heads != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--dim ", o.dim, " is not a multiple of --heads ", o.heads, "; give --head-dim"));
    }
    o.head_dim = o.dim / o.heads;
  }
  if (auto s = Positive("head-dim", o.head_dim); !s.ok()) return s;
  if (o.ffn == 0) o.ffn = RoundUp(o.dim * 8 / 3, 256);
  if (auto s = Positive("ffn", o.ffn); !s.ok()) return s;
  if (moe) {
    if (o.experts == 0) o.experts = 8;
    if (o.experts_used == 0) o.experts_used = 2;
    if (o.expert_ffn == 0) {
      o.expert_ffn = o.arch == SyntheticArch::kMixtral ? o.ffn : RoundUp(o.ffn / 2, 32);
    }
    if (auto s = Positive("experts", o.experts); !s.ok()) return s;
    if (auto s = Positive("expert-ffn", o.expert_ffn); !s.ok()) return s;
    if (o.experts_used < 1 || o.experts_used > o.experts) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--experts-used ", o.experts_used, " must be between 1 and --experts ", o.experts));
    }
  } else if (o.experts > 0 || o.shared_experts > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--experts/--shared-experts need a MoE --arch (mixtral, qwen3moe, deepseek2), not ",
        SyntheticArchFlagName(o.arch)));
  }
  const bool glm = o.arch == SyntheticArch::kGlm4Moe;
  if (HasDeepseekMoe(o.arch)) {
    if (o.shared_experts < 0) o.shared_experts = 1;
    if (o.dense_layers < 0) o.dense_layers = std::min<int64_t>(1, o.layers);
    if (o.rope_dim == 0) o.rope_dim = o.head_dim / 2;
    if (o.dense_layers > o.layers) {
      return absl::InvalidArgumentError(
          absl::StrCat("--dense-layers ", o.dense_layers, " is more than --layers ", o.layers));
    }
    if (auto s = Positive("rope-dim", o.rope_dim); !s.ok()) return s;
  } else {
    if (o.dense_layers > 0 || o.rope_dim > 0) {
      return absl::InvalidArgumentError(
          "--dense-layers and --rope-dim apply to --arch deepseek2 and glm4moe only");
    }
    o.shared_experts = 0;
    o.dense_layers = 0;
    o.rope_dim = o.head_dim;
  }
  if (mla) {
    if (o.q_lora_rank < 0) o.q_lora_rank = o.dim / 2;
    if (o.kv_lora_rank == 0) o.kv_lora_rank = o.dim / 4;
    if (auto s = Positive("kv-lora-rank", o.kv_lora_rank); !s.ok()) return s;
  } else {
    if (o.q_lora_rank > 0 || o.kv_lora_rank > 0 || o.mla_fused) {
      return absl::InvalidArgumentError(
          "--q-lora-rank, --kv-lora-rank and --mla-fused apply to --arch deepseek2 only");
    }
    if (HasWindow(o.arch) && o.sliding_window == 0) o.sliding_window = 128;
    o.q_lora_rank = 0;
    if (glm && o.rope_dim > o.head_dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("--rope-dim ", o.rope_dim, " is more than the head dimension ", o.head_dim));
    }
  }
  if (o.sliding_window < 0 || (o.sliding_window > 0 && !HasWindow(o.arch))) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sliding-window ", o.sliding_window,
                     " applies to --arch gpt-oss, gemma2 and gemma3 only and must be >= 0"));
  }
  if (o.rope_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the rope dimension ", o.rope_dim, " must be even (--rope-dim/--head-dim)"));
  }
  return o;
}

ModelSpec BuildModelSpec(const MkModelOptions& resolved) { return SpecBuilder(resolved).Build(); }

}  // namespace waste::tools
