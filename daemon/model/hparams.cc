#include "daemon/model/hparams.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace waste::model {
namespace {

absl::StatusOr<int64_t> RequiredInt(const storage::GgufFile& gguf, const std::string& key) {
  absl::StatusOr<int64_t> value = gguf.GetInt(key);
  if (!value.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(gguf.path(), ": cannot read ", key, ": ", value.status().message()));
  }
  if (*value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(gguf.path(), ": ", key, " must be positive, is ", *value));
  }
  return *value;
}

int64_t OptionalInt(const storage::GgufFile& gguf, const std::string& key, int64_t fallback) {
  absl::StatusOr<int64_t> value = gguf.GetInt(key);
  return value.ok() ? *value : fallback;
}

double OptionalFloat(const storage::GgufFile& gguf, const std::string& key, double fallback) {
  absl::StatusOr<double> value = gguf.GetFloat(key);
  return value.ok() ? *value : fallback;
}

bool OptionalBool(const storage::GgufFile& gguf, const std::string& key, bool fallback) {
  absl::StatusOr<bool> value = gguf.GetBool(key);
  return value.ok() ? *value : fallback;
}

// The expert keys every MoE architecture shares, then each one's defaults
// as llama.cpp's loader and graph builders apply them.
absl::Status ReadMoe(const storage::GgufFile& gguf, HParams* hp) {
  const std::string& a = hp->arch_name;
  MoeParams& moe = hp->moe;
  moe.n_expert = OptionalInt(gguf, a + ".expert_count", 0);
  const bool moe_arch = hp->arch == Arch::kQwen2Moe || hp->arch == Arch::kQwen3Moe ||
                        hp->arch == Arch::kDeepseek2 || hp->arch == Arch::kGptOss ||
                        hp->arch == Arch::kGlm4Moe;
  if (moe.n_expert <= 0) {
    if (moe_arch) {
      return absl::InvalidArgumentError(
          absl::StrCat(gguf.path(), ": ", a, ".expert_count must be positive for ", a));
    }
    moe.n_expert = 0;
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(moe.n_expert_used, RequiredInt(gguf, a + ".expert_used_count"));
  if (moe.n_expert_used > moe.n_expert) {
    return absl::InvalidArgumentError(absl::StrCat(gguf.path(), ": ", a, ".expert_used_count ",
                                                   moe.n_expert_used, " exceeds expert_count ",
                                                   moe.n_expert));
  }
  moe.weights_scale = static_cast<float>(OptionalFloat(gguf, a + ".expert_weights_scale", 0.0));
  switch (hp->arch) {
    case Arch::kLlama:  // mixtral: experts of feed_forward_length rows.
      moe.n_ff_exp = hp->n_ff;
      moe.norm_weights = true;
      break;
    case Arch::kQwen3Moe:  // norm_topk_prob: llama.cpp always renormalises.
      moe.n_ff_exp = OptionalInt(gguf, a + ".expert_feed_forward_length", hp->n_ff);
      moe.norm_weights = true;
      break;
    case Arch::kQwen2Moe:
      moe.n_ff_exp =
          OptionalInt(gguf, a + ".expert_feed_forward_length", hp->n_ff / moe.n_expert_used);
      moe.n_ff_shexp = OptionalInt(gguf, a + ".expert_shared_feed_forward_length", hp->n_ff);
      break;
    case Arch::kDeepseek2:
    case Arch::kGlm4Moe: {
      ASSIGN_OR_RETURN(moe.n_ff_exp, RequiredInt(gguf, a + ".expert_feed_forward_length"));
      moe.n_ff_shexp = moe.n_ff_exp * OptionalInt(gguf, a + ".expert_shared_count", 0);
      moe.n_layer_dense_lead = OptionalInt(gguf, a + ".leading_dense_block_count", 0);
      moe.norm_weights = OptionalBool(gguf, a + ".expert_weights_norm", false);
      // deepseek2: 0 (absent) is V2's softmax, as llama.cpp keeps it for
      // old files. glm4moe: absent or 0 is sigmoid (GLM-4.5's).
      const bool glm = hp->arch == Arch::kGlm4Moe;
      int64_t gating = OptionalInt(gguf, a + ".expert_gating_func", glm ? 2 : 1);
      if (gating == 0) gating = glm ? 2 : 1;
      if (gating == 1) {
        moe.gating = ExpertGating::kSoftmax;
      } else if (gating == 2) {
        moe.gating = ExpertGating::kSigmoid;
      } else {
        return absl::UnimplementedError(absl::StrCat(gguf.path(), ": ", a, ".expert_gating_func ",
                                                     gating,
                                                     " is not supported (1 softmax, 2 sigmoid)"));
      }
      // llama.cpp's glm4moe loader reads no expert groups.
      if (!glm) {
        moe.n_group = OptionalInt(gguf, a + ".expert_group_count", 0);
        moe.n_group_used = OptionalInt(gguf, a + ".expert_group_used_count", 0);
      }
      break;
    }
    case Arch::kGptOss: {  // Router and expert biases; softmax of the chosen logits.
      ASSIGN_OR_RETURN(moe.n_ff_exp, RequiredInt(gguf, a + ".expert_feed_forward_length"));
      moe.gating = ExpertGating::kSoftmaxChosen;
      moe.swiglu_oai = true;
      break;
    }
    default:
      break;
  }
  if (moe.n_ff_exp <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(gguf.path(), ": ", a, ".expert_feed_forward_length must be positive"));
  }
  if (moe.n_group > 1) {
    const int64_t per_group = moe.n_expert / moe.n_group;
    if (moe.n_expert % moe.n_group != 0 || per_group < 2 || moe.n_group_used < 1 ||
        moe.n_group_used > moe.n_group || moe.n_group_used * per_group < moe.n_expert_used) {
      return absl::InvalidArgumentError(absl::StrCat(gguf.path(), ": ", a, ".expert_group_count ",
                                                     moe.n_group, " / expert_group_used_count ",
                                                     moe.n_group_used, " do not fit ", moe.n_expert,
                                                     " experts with ", moe.n_expert_used, " used"));
    }
  }
  return absl::OkStatus();
}

// llama_context's get_mscale.
float YarnMscale(float scale, float mscale) {
  return scale <= 1.0f ? 1.0f : 0.1f * mscale * std::log(scale) + 1.0f;
}

// deepseek2's MLA shape, and its rope magnitude and score scale as
// llama.cpp derives them: llama_context turns the GGUF's attn_factor and
// yarn_log_multiplier into cparams.yarn_attn_factor, the graph then undoes
// ggml's YaRN magnitude to recover the original factor and squares YaRN's
// mscale into kq_scale.
absl::Status ReadMla(const storage::GgufFile& gguf, bool yarn, HParams* hp) {
  const std::string& a = hp->arch_name;
  MlaParams& mla = hp->mla;
  mla.q_lora_rank = OptionalInt(gguf, a + ".attention.q_lora_rank", 0);
  ASSIGN_OR_RETURN(mla.kv_lora_rank, RequiredInt(gguf, a + ".attention.kv_lora_rank"));
  const std::string k_key = a + ".attention.key_length_mla",
                    v_key = a + ".attention.value_length_mla";
  const bool split = gguf.GetInt(k_key).ok();
  mla.qk_rope = hp->rope.n_rot;
  if (split != gguf.GetInt(v_key).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(gguf.path(), ": ", a,
                     ".attention.key_length_mla and value_length_mla come together; the file "
                     "has only one of them"));
  }
  if (split) {
    // The split form (attn_k_b, attn_v_b): stored as MQA over the latent.
    ASSIGN_OR_RETURN(const int64_t k_mla, RequiredInt(gguf, k_key));
    ASSIGN_OR_RETURN(mla.v_head, RequiredInt(gguf, v_key));
    mla.qk_nope = k_mla - mla.qk_rope;
    if (hp->n_head_kv != 1 || hp->head_dim != mla.kv_lora_rank + mla.qk_rope) {
      return absl::InvalidArgumentError(
          absl::StrCat(gguf.path(), ": MLA expects ", a,
                       ".attention.head_count_kv 1 and key_length ", mla.kv_lora_rank + mla.qk_rope,
                       " (kv_lora_rank + rope dims), got ", hp->n_head_kv, " and ", hp->head_dim));
    }
  } else {
    // Converted before llama.cpp split attn_kv_b (spring 2025): key_length
    // and value_length are the per-head sizes, one KV head per head. The
    // cache holds the latent all the same (mla.cc).
    mla.fused_kv_b = true;
    mla.qk_nope = hp->head_dim - mla.qk_rope;
    ASSIGN_OR_RETURN(mla.v_head, RequiredInt(gguf, a + ".attention.value_length"));
    hp->n_head_kv = 1;
    hp->head_dim = mla.kv_lora_rank + mla.qk_rope;
  }
  if (mla.qk_nope <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        gguf.path(), ": ", a, ".attention.key_length", mla.fused_kv_b ? "" : "_mla", " ",
        mla.qk_nope + mla.qk_rope, " must exceed rope.dimension_count ", mla.qk_rope));
  }
  kernels::ops::RopeParams& rope = hp->rope;
  const float rope_attn_factor =
      static_cast<float>(OptionalFloat(gguf, a + ".rope.scaling.attn_factor", 1.0));
  // The converter writes 0.1 * mscale_all_dims.
  const float log_mul =
      static_cast<float>(OptionalFloat(gguf, a + ".rope.scaling.yarn_log_multiplier", 0.0)) / 0.1f;
  float attn_factor = 1.0f;
  if (yarn) {
    const float factor = 1.0f / rope.freq_scale;
    // With a log multiplier llama_context sets get_mscale(f, m) /
    // get_mscale(f, log_mul) where deepseek2 takes m = log_mul: 1.
    attn_factor = log_mul != 0.0f ? 1.0f : YarnMscale(factor, 1.0f);
    // Cancels the magnitude ggml's YaRN rope multiplies in.
    attn_factor *= 1.0f / (1.0f + 0.1f * std::log(factor));
  }
  attn_factor *= rope_attn_factor;
  rope.attn_factor = attn_factor;
  const float ln_inv_scale = std::log(1.0f / rope.freq_scale);
  const float attn_factor_org = attn_factor * (1.0f + 0.1f * ln_inv_scale);
  const float mscale = attn_factor_org * (1.0f + 0.1f * log_mul * ln_inv_scale);
  mla.kq_scale = mscale * mscale / std::sqrt(static_cast<float>(mla.qk_nope + mla.qk_rope));
  return absl::OkStatus();
}

// glm4moe: the multi-token-prediction ("NextN") blocks follow the model's
// own in block_count; llama.cpp loads and skips them.
absl::Status DropNextnBlocks(const storage::GgufFile& gguf, HParams* hp) {
  const std::string key = hp->arch_name + ".nextn_predict_layers";
  const int64_t nextn = OptionalInt(gguf, key, 0);
  if (nextn < 0 || nextn >= hp->n_layer) {
    return absl::InvalidArgumentError(absl::StrCat(
        gguf.path(), ": ", key, " ", nextn, " must be >= 0 and below block_count ", hp->n_layer));
  }
  hp->n_layer -= nextn;
  return absl::OkStatus();
}

// M-RoPE (position sections per axis) is for GLM's vision variants: llama.cpp
// takes it when the first two sections are set.
absl::Status RefuseMrope(const storage::GgufFile& gguf, const std::string& arch) {
  const std::string key = arch + ".rope.dimension_sections";
  if (gguf.Find(key) == nullptr) return absl::OkStatus();
  absl::StatusOr<std::vector<int64_t>> sections = gguf.GetIntArray(key);
  if (!sections.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(gguf.path(), ": cannot read ", key, ": ", sections.status().message()));
  }
  if (sections->size() >= 2 && (*sections)[0] > 0 && (*sections)[1] > 0) {
    return absl::UnimplementedError(absl::StrCat(
        gguf.path(), ": ", key, " asks for multi-axis RoPE (a vision model), not supported"));
  }
  return absl::OkStatus();
}

// Gemma's departures from llama, as llama.cpp's loader and graphs apply
// them: embeddings times sqrt(n_embd), GELU, a query scale of 1/sqrt(head
// dim) except for the 27B models (1/sqrt(n_embd / n_head), which llama.cpp
// tells by their layer count); Gemma 2 adds post-norms, soft-capped scores
// and logits (50 and 30 unless the file says) and a window on the even
// layers (4096 unless the file says); Gemma 3 drops the caps (the logits'
// stays if the file has it), adds Q/K norms (bound by the model) and a
// window on five layers in six, whose RoPE is base 10000 unscaled.
void ReadGemma(const storage::GgufFile& gguf, HParams* hp) {
  const std::string& a = hp->arch_name;
  hp->embd_scale = std::sqrt(static_cast<float>(hp->n_embd));
  hp->ffn_gelu = true;
  const bool is_27b = (hp->arch == Arch::kGemma2 && hp->n_layer == 46) ||
                      (hp->arch == Arch::kGemma3 && hp->n_layer == 62);
  const int64_t query_dim = is_27b ? hp->n_embd / hp->n_head : hp->head_dim;
  hp->attn_scale = 1.0f / std::sqrt(static_cast<float>(query_dim));
  if (hp->arch == Arch::kGemma) return;
  hp->post_norms = true;
  if (hp->arch == Arch::kGemma2) {
    hp->n_swa = OptionalInt(gguf, a + ".attention.sliding_window", 4096);
    hp->swa_period = 2;
    hp->attn_softcap = static_cast<float>(OptionalFloat(gguf, a + ".attn_logit_softcapping", 50));
    hp->final_softcap = static_cast<float>(OptionalFloat(gguf, a + ".final_logit_softcapping", 30));
    return;
  }
  hp->final_softcap = static_cast<float>(OptionalFloat(gguf, a + ".final_logit_softcapping", 0));
  hp->n_swa = std::max<int64_t>(0, OptionalInt(gguf, a + ".attention.sliding_window", 0));
  hp->swa_period = 6;
  if (hp->n_swa > 0) {
    hp->has_rope_swa = true;
    hp->rope_swa = hp->rope;
    hp->rope_swa.freq_base = 10000.0f;
    hp->rope_swa.freq_scale = 1.0f;
  }
}

}  // namespace

int64_t HParams::max_ff() const { return std::max({n_ff, moe.n_ff_exp, moe.n_ff_shexp}); }

absl::StatusOr<HParams> ReadHParams(const storage::GgufFile& gguf) {
  HParams hp;
  ASSIGN_OR_RETURN(hp.arch_name, gguf.GetString("general.architecture"));
  const std::string& a = hp.arch_name;
  if (a == "llama") {
    hp.arch = Arch::kLlama;
  } else if (a == "qwen2") {
    hp.arch = Arch::kQwen2;
  } else if (a == "qwen3") {
    hp.arch = Arch::kQwen3;
  } else if (a == "qwen2moe") {
    hp.arch = Arch::kQwen2Moe;
  } else if (a == "qwen3moe") {
    hp.arch = Arch::kQwen3Moe;
  } else if (a == "deepseek2") {
    hp.arch = Arch::kDeepseek2;
  } else if (a == "gpt-oss") {
    hp.arch = Arch::kGptOss;
  } else if (a == "glm4moe") {
    hp.arch = Arch::kGlm4Moe;
  } else if (a == "gemma") {
    hp.arch = Arch::kGemma;
  } else if (a == "gemma2") {
    hp.arch = Arch::kGemma2;
  } else if (a == "gemma3") {
    hp.arch = Arch::kGemma3;
  } else {
    return absl::UnimplementedError(
        absl::StrCat(gguf.path(), ": architecture '", a,
                     "' is not supported (supported: llama (incl. mixtral), qwen2, qwen3, "
                     "qwen2moe, qwen3moe, deepseek2, gpt-oss, glm4moe, gemma, gemma2, gemma3)"));
  }
  ASSIGN_OR_RETURN(hp.n_embd, RequiredInt(gguf, a + ".embedding_length"));
  ASSIGN_OR_RETURN(hp.n_layer, RequiredInt(gguf, a + ".block_count"));
  if (hp.arch == Arch::kGlm4Moe) RETURN_IF_ERROR(DropNextnBlocks(gguf, &hp));
  ASSIGN_OR_RETURN(hp.n_head, RequiredInt(gguf, a + ".attention.head_count"));
  ASSIGN_OR_RETURN(hp.n_ff, RequiredInt(gguf, a + ".feed_forward_length"));
  hp.n_head_kv = OptionalInt(gguf, a + ".attention.head_count_kv", hp.n_head);
  hp.head_dim = OptionalInt(gguf, a + ".attention.key_length", hp.n_embd / hp.n_head);
  hp.n_ctx_train = OptionalInt(gguf, a + ".context_length", 2048);
  hp.rms_eps =
      static_cast<float>(OptionalFloat(gguf, a + ".attention.layer_norm_rms_epsilon", 1e-5));
  if (hp.n_head_kv <= 0 || hp.n_head % hp.n_head_kv != 0) {
    return absl::InvalidArgumentError(absl::StrCat(gguf.path(), ": head_count ", hp.n_head,
                                                   " is not a multiple of head_count_kv ",
                                                   hp.n_head_kv));
  }
  if (hp.head_dim <= 0 || hp.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(gguf.path(), ": head dimension ", hp.head_dim, " must be even and positive"));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> tokens, gguf.GetStringArray("tokenizer.ggml.tokens"));
  hp.n_vocab = static_cast<int64_t>(tokens.size());

  kernels::ops::RopeParams& rope = hp.rope;
  if (hp.arch == Arch::kGlm4Moe) RETURN_IF_ERROR(RefuseMrope(gguf, a));
  rope.mode = hp.arch == Arch::kLlama || hp.arch == Arch::kDeepseek2
                  ? kernels::ops::RopeMode::kNormal
                  : kernels::ops::RopeMode::kNeox;
  rope.n_rot = static_cast<int>(OptionalInt(gguf, a + ".rope.dimension_count", hp.head_dim));
  rope.freq_base = static_cast<float>(OptionalFloat(gguf, a + ".rope.freq_base", 10000.0));
  double factor = OptionalFloat(gguf, a + ".rope.scaling.factor", 0.0);
  // A factor without a type is linear scaling, as llama.cpp reads it.
  std::string scaling =
      gguf.GetString(a + ".rope.scaling.type").value_or(factor > 0 ? "linear" : "none");
  if (scaling == "linear" && factor > 0) {
    rope.freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling == "yarn" && factor > 0) {
    rope.freq_scale = static_cast<float>(1.0 / factor);
    rope.ext_factor = 1.0f;
    rope.n_ctx_orig = static_cast<int>(
        OptionalInt(gguf, a + ".rope.scaling.original_context_length", hp.n_ctx_train));
    rope.attn_factor =
        static_cast<float>(OptionalFloat(gguf, a + ".rope.scaling.attn_factor", 1.0));
  } else if (scaling != "none" && scaling != "") {
    return absl::UnimplementedError(
        absl::StrCat(gguf.path(), ": rope scaling type '", scaling, "' is not supported"));
  }
  if (rope.n_rot <= 0 || rope.n_rot > hp.head_dim || rope.n_rot % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(gguf.path(), ": rope.dimension_count ",
                                                   rope.n_rot, " does not fit head dimension ",
                                                   hp.head_dim));
  }
  RETURN_IF_ERROR(ReadMoe(gguf, &hp));
  if (hp.arch == Arch::kGptOss) {
    ASSIGN_OR_RETURN(hp.n_swa, RequiredInt(gguf, a + ".attention.sliding_window"));
  }
  if (hp.arch == Arch::kDeepseek2) RETURN_IF_ERROR(ReadMla(gguf, rope.ext_factor != 0, &hp));
  if (hp.arch == Arch::kGemma || hp.arch == Arch::kGemma2 || hp.arch == Arch::kGemma3) {
    ReadGemma(gguf, &hp);
  }
  return hp;
}

}  // namespace waste::model
