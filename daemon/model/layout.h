// ModelLayout: where a GGUF model's bytes are, by part of the transformer
// (embeddings, attention, dense FFN, routed experts, ...) and by layer.
//
// Tensors are classified by their llama.cpp names alone ("blk.7.attn_q.weight",
// "blk.3.ffn_up_exps.weight", "output_norm.weight"), so the layout works for
// any architecture that follows llama.cpp's naming, including ones the engine
// cannot run yet, and for tensor types it cannot compute. The memory plan uses
// it to size pinned and streamed sets; `wasted inspect` prints it.
//
// A ModelLayout is a plain value: immutable after FromGguf, safe to share.
#ifndef WASTE_DAEMON_MODEL_LAYOUT_H_
#define WASTE_DAEMON_MODEL_LAYOUT_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/ggml_types.h"
#include "storage/gguf.h"

namespace waste::model {

// The parts a tensor can belong to. The order is the order reports use.
enum class TensorPart : int {
  kEmbeddings = 0,  // token_embd, pos_embd
  kAttention,       // attn_q/k/v/output/qkv (+ biases); MLA's attn_q_a/q_b,
                    // attn_kv_a_mqa, attn_kv_b, attn_k_b, attn_v_b and the
                    // attn_q_a_norm / attn_kv_a_norm inside that projection chain
  kNorms,           // attn_norm, ffn_norm, output_norm, attn_q_norm/attn_k_norm, ...
  kDenseFfn,        // ffn_gate/up/down (+ biases) of dense layers
  kRouter,          // ffn_gate_inp, exp_probs_b
  kRoutedExperts,   // ffn_{gate,up,down}_exps (3-D, one slice per expert), or
                    // the old split form ffn_{gate,up,down}.E
  kSharedExperts,   // ffn_*_shexp, ffn_gate_inp_shexp
  kOutput,          // output.weight / output.bias (the LM head)
  kOther,           // anything else (rope_freqs, unknown names)
};
inline constexpr int kNumTensorParts = 9;

// "embeddings", "attention", "norms", "dense_ffn", "router",
// "routed_experts", "shared_experts", "output", "other".
const char* TensorPartName(TensorPart part);

// Where one tensor belongs, from its name.
struct TensorClass {
  TensorPart part = TensorPart::kOther;
  int layer = -1;  // N of "blk.N.", -1 for tensors outside the blocks.
};
TensorClass ClassifyTensor(std::string_view name);

// Bytes per part.
struct PartBytes {
  std::array<uint64_t, kNumTensorParts> bytes{};

  uint64_t& operator[](TensorPart part) { return bytes[static_cast<int>(part)]; }
  uint64_t operator[](TensorPart part) const { return bytes[static_cast<int>(part)]; }
  uint64_t Total() const;
};

struct LayerLayout {
  int index = 0;
  PartBytes parts;
  uint64_t bytes = 0;  // All of this layer's tensors.
  // Routed experts in this layer (0 for a dense layer) and the bytes of one
  // expert's slice of gate + up + down: routed bytes / n_expert.
  int64_t n_expert = 0;
  uint64_t expert_bytes = 0;
};

// Tensor count and bytes of one ggml type.
struct TypeBytes {
  int64_t tensors = 0;
  uint64_t bytes = 0;
  int64_t params = 0;
};

class ModelLayout {
 public:
  // Classifies every tensor of `gguf`. Fails (INVALID_ARGUMENT, naming the
  // tensor) when the experts contradict themselves: a 3-D expert tensor whose
  // ne2 differs from {arch}.expert_count or from its layer's other expert
  // tensors. Missing metadata is not an error: counts are then taken from
  // the tensors (0 when there are none).
  static absl::StatusOr<ModelLayout> FromGguf(const storage::GgufFile& gguf);

  // general.architecture, "" if absent.
  const std::string& arch() const { return arch_; }

  // Bytes of every tensor (the file's tensor data, without padding).
  uint64_t total_bytes() const { return total_bytes_; }
  int64_t total_params() const { return total_params_; }
  int64_t tensor_count() const { return tensor_count_; }

  const PartBytes& parts() const { return parts_; }
  // Per ggml type, in id order.
  const std::map<storage::GgmlType, TypeBytes>& types() const { return types_; }

  // One entry per block: max({arch}.block_count, highest blk.N + 1) entries.
  // A layer without tensors has all-zero sizes.
  const std::vector<LayerLayout>& layers() const { return layers_; }

  // Per tensor, in file order (index into gguf.tensors()).
  const std::vector<TensorClass>& tensor_classes() const { return classes_; }

  // {arch}.expert_count (else the experts found in tensors), and
  // {arch}.expert_used_count (0 when absent).
  int64_t expert_count() const { return expert_count_; }
  int64_t experts_used() const { return experts_used_; }
  // {arch}.expert_shared_count (0 when absent).
  int64_t shared_expert_count() const { return shared_expert_count_; }
  // Layers with routed experts.
  int moe_layer_count() const { return moe_layer_count_; }
  // One routed expert's bytes in one MoE layer (the largest, should layers
  // differ); 0 for a dense model.
  uint64_t expert_bytes() const { return expert_bytes_; }

  // Bytes of weights one token reads: everything except the routed experts
  // and the token embeddings, plus experts_used experts of each MoE layer
  // (at that layer's expert size: mixes give layers experts of different
  // types) and one row of token_embd (the whole table when it is also the
  // output head, i.e. there is no output.weight). Every tensor counts at
  // its own type's size. (With experts_used unknown, all experts count.)
  // Multi-token-prediction blocks (glm4moe's nextn) are never read.
  uint64_t ActiveBytesPerToken() const;

  // The smallest routed expert of any MoE layer (== expert_bytes() unless
  // layers' experts differ in type or shape); 0 for a dense model.
  uint64_t min_expert_bytes() const { return min_expert_bytes_; }

 private:
  std::string arch_;
  uint64_t total_bytes_ = 0;
  int64_t total_params_ = 0;
  int64_t tensor_count_ = 0;
  PartBytes parts_;
  std::map<storage::GgmlType, TypeBytes> types_;
  std::vector<LayerLayout> layers_;
  std::vector<TensorClass> classes_;
  int64_t expert_count_ = 0;
  int64_t experts_used_ = 0;
  int64_t shared_expert_count_ = 0;
  int moe_layer_count_ = 0;
  uint64_t expert_bytes_ = 0;
  uint64_t min_expert_bytes_ = 0;
  // token_embd.weight's bytes and one row's, and whether output.weight
  // exists (else the table is the head too).
  uint64_t embd_bytes_ = 0;
  uint64_t embd_row_bytes_ = 0;
  bool has_output_ = false;
  // Layers from here on are multi-token-prediction blocks (glm4moe's
  // nextn_predict_layers) that decoding never reads.
  int64_t first_unread_layer_ = INT64_MAX;
};

}  // namespace waste::model

#endif  // WASTE_DAEMON_MODEL_LAYOUT_H_
