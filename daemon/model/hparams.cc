#include "daemon/model/hparams.h"

#include "absl/strings/str_cat.h"
#include "storage/status_macros.h"

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

}  // namespace

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
  } else {
    return absl::UnimplementedError(absl::StrCat(
        gguf.path(), ": architecture '", a, "' is not supported (supported: llama, qwen2, qwen3)"));
  }
  ASSIGN_OR_RETURN(hp.n_embd, RequiredInt(gguf, a + ".embedding_length"));
  ASSIGN_OR_RETURN(hp.n_layer, RequiredInt(gguf, a + ".block_count"));
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
  rope.mode =
      hp.arch == Arch::kLlama ? kernels::ops::RopeMode::kNormal : kernels::ops::RopeMode::kNeox;
  rope.n_rot = static_cast<int>(OptionalInt(gguf, a + ".rope.dimension_count", hp.head_dim));
  rope.freq_base = static_cast<float>(OptionalFloat(gguf, a + ".rope.freq_base", 10000.0));
  std::string scaling = gguf.GetString(a + ".rope.scaling.type").value_or("none");
  double factor = OptionalFloat(gguf, a + ".rope.scaling.factor", 0.0);
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
  return hp;
}

}  // namespace waste::model
