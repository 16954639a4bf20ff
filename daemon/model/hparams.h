// A model's hyperparameters, read from GGUF metadata as llama.cpp names the
// keys ("{arch}.embedding_length", "{arch}.attention.head_count", ...),
// including the mixture-of-experts keys (expert_count, expert_used_count,
// expert_gating_func, ...) and DeepSeek-V2/V3's multi-head latent attention
// (attention.q_lora_rank, attention.kv_lora_rank, ..._mla lengths).
#ifndef WASTE_DAEMON_MODEL_HPARAMS_H_
#define WASTE_DAEMON_MODEL_HPARAMS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/kernels/ops/rope.h"
#include "storage/gguf.h"

namespace waste::model {

// kLlama covers mixtral-style models too: llama.cpp writes them as "llama"
// with expert_count > 0. kGptOss is OpenAI's gpt-oss ("gpt-oss"; llama.cpp's
// LLM_ARCH_OPENAI_MOE); kGlm4Moe Zhipu's GLM-4.5/4.6 and GLM-4.5-Air
// ("glm4moe"). kGemma, kGemma2, kGemma3: Google's Gemma 1, 2 and 3 (text).
enum class Arch {
  kLlama,
  kQwen2,
  kQwen3,
  kQwen2Moe,
  kQwen3Moe,
  kDeepseek2,
  kGptOss,
  kGlm4Moe,
  kGemma,
  kGemma2,
  kGemma3
};

// How router logits become expert probabilities (llama.cpp's
// llama_expert_gating_func_type: 1 softmax, 2 sigmoid, 3 softmax over the
// chosen experts' logits only: gpt-oss).
enum class ExpertGating { kSoftmax, kSigmoid, kSoftmaxChosen };

// Routed experts. n_expert == 0 means a dense model.
struct MoeParams {
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;            // Rows of one expert's gate/up.
  int64_t n_ff_shexp = 0;          // Width of the shared expert FFN; 0 if none.
  int64_t n_layer_dense_lead = 0;  // Leading layers with a dense FFN (deepseek2).
  ExpertGating gating = ExpertGating::kSoftmax;
  // Divide the chosen experts' probabilities by their sum, then multiply by
  // weights_scale when it is not 0.
  bool norm_weights = false;
  float weights_scale = 0;
  // Group-limited routing (DeepSeek-V3): experts form n_group equal groups;
  // only the n_group_used groups with the best top-2 sums are eligible.
  // n_group <= 1 disables it.
  int64_t n_group = 0;
  int64_t n_group_used = 0;
  // gpt-oss's expert activation (ggml's swiglu_oai): with the gate g
  // clamped above at kOaiLimit and the up projection u to +-kOaiLimit,
  // g * sigmoid(kOaiAlpha * g) * (u + 1).
  bool swiglu_oai = false;
};
inline constexpr float kOaiAlpha = 1.702f;
inline constexpr float kOaiLimit = 7.0f;

// Multi-head latent attention (deepseek2). kv_lora_rank == 0: not MLA.
// The KV cache holds one row of kv_lora_rank + qk_rope per position (the
// normalised latent and the roped shared key), attended to as MQA with the
// absorbed query (see mla.cc).
struct MlaParams {
  int64_t q_lora_rank = 0;  // 0: attn_q projects the input directly.
  int64_t kv_lora_rank = 0;
  int64_t qk_nope = 0;  // Per-head query/key dims without rope.
  int64_t qk_rope = 0;  // = rope.n_rot.
  int64_t v_head = 0;   // Per-head value dims after attn_v_b.
  // Files converted before llama.cpp's split (spring 2025) hold W_k_b and
  // W_v_b as one attn_kv_b of n_head * (qk_nope + v_head) rows of
  // kv_lora_rank: per head its qk_nope key rows, then its v_head value rows.
  bool fused_kv_b = false;
  // Attention score scale: mscale^2 / sqrt(qk_nope + qk_rope), with YaRN's
  // mscale as llama.cpp's deepseek2 graph computes it.
  float kq_scale = 0;
};

struct HParams {
  std::string arch_name;  // general.architecture
  Arch arch = Arch::kLlama;
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  // Blocks the forward pass runs: block_count less the multi-token
  // prediction blocks at the end (glm4moe's nextn_predict_layers), whose
  // tensors are in the file but never read.
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  // attention.key_length, else n_embd / n_head. For MLA this is the cached
  // row, kv_lora_rank + qk_rope, and n_head_kv is 1.
  int64_t head_dim = 0;
  int64_t n_ff = 0;
  int64_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  kernels::ops::RopeParams rope;  // freq_factors is bound by the model at load.
  MoeParams moe;
  MlaParams mla;
  // Sliding-window attention: layer l with l % swa_period < swa_period - 1
  // attends to the last n_swa positions only (llama.cpp's swa pattern:
  // gpt-oss and gemma2 the even layers, gemma3 five in six; the window
  // counted with the query's own position). 0: every layer attends to all.
  int64_t n_swa = 0;
  int64_t swa_period = 2;
  // Gemma 3: the sliding-window layers' own RoPE (base 10000, unscaled);
  // `rope` is the other layers'.
  bool has_rope_swa = false;
  kernels::ops::RopeParams rope_swa;

  // Gemma: token embeddings times embd_scale (sqrt(n_embd)); 0: as stored.
  float embd_scale = 0;
  // Attention score scale; 0: 1 / sqrt(head_dim) (MLA: mla.kq_scale).
  float attn_scale = 0;
  // Gemma 2's soft-capping: attention scores (after the scale) and output
  // logits x become cap * tanh(x / cap). 0: none.
  float attn_softcap = 0;
  float final_softcap = 0;
  // Gemma: the FFN's gate through GELU (tanh form), not SiLU.
  bool ffn_gelu = false;
  // Gemma 2/3: RMS norms on the attention's and the FFN's outputs before
  // each residual add (post_attention_norm, post_ffw_norm).
  bool post_norms = false;

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
  bool is_mla() const { return mla.kv_lora_rank > 0; }
  bool IsMoeLayer(int64_t l) const { return moe.n_expert > 0 && l >= moe.n_layer_dense_lead; }
  // Positions layer l attends back over, the query's own included; 0: all.
  int64_t AttentionWindow(int64_t l) const { return IsSwaLayer(l) ? n_swa : 0; }
  bool IsSwaLayer(int64_t l) const { return n_swa > 0 && l % swa_period < swa_period - 1; }
  // The RoPE of layer l.
  const kernels::ops::RopeParams& RopeOf(int64_t l) const {
    return has_rope_swa && IsSwaLayer(l) ? rope_swa : rope;
  }
  // The widest FFN hidden size of any block (dense, expert or shared).
  int64_t max_ff() const;
};

// Reads and checks the hyperparameters; an unsupported architecture or a
// missing/inconsistent key is an error naming the key.
absl::StatusOr<HParams> ReadHParams(const storage::GgufFile& gguf);

}  // namespace waste::model

#endif  // WASTE_DAEMON_MODEL_HPARAMS_H_
