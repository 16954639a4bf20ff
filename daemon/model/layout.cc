#include "daemon/model/layout.h"

#include <algorithm>
#include <charconv>
#include <string>

#include "absl/strings/str_cat.h"

namespace waste::model {
namespace {

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Parses a non-negative decimal prefix of `s` into *value and drops it from
// `s`. False if `s` does not start with a digit or the number overflows.
bool ConsumeNumber(std::string_view* s, int64_t* value) {
  const char* begin = s->data();
  const char* end = begin + s->size();
  auto [ptr, ec] = std::from_chars(begin, end, *value);
  if (ec != std::errc() || ptr == begin || *value < 0) return false;
  s->remove_prefix(ptr - begin);
  return true;
}

// "ffn_gate.7" -> true (the split per-expert form old Mixtral files use).
bool IsSplitExpert(std::string_view base) {
  for (std::string_view prefix : {"ffn_gate.", "ffn_up.", "ffn_down."}) {
    if (!StartsWith(base, prefix)) continue;
    std::string_view rest = base.substr(prefix.size());
    int64_t expert = 0;
    return ConsumeNumber(&rest, &expert) && rest.empty();
  }
  return false;
}

TensorPart ClassifyBase(std::string_view base) {
  if (base == "token_embd" || base == "pos_embd" || base == "token_types") {
    return TensorPart::kEmbeddings;
  }
  if (base == "output") return TensorPart::kOutput;
  // Router before the generic ffn_ rule; the shared experts' own gate
  // (ffn_gate_inp_shexp) belongs with the shared experts.
  if (EndsWith(base, "_shexp")) return TensorPart::kSharedExperts;
  if (base == "ffn_gate_inp" || base == "exp_probs_b") return TensorPart::kRouter;
  if (EndsWith(base, "_exps") || IsSplitExpert(base)) return TensorPart::kRoutedExperts;
  // MLA's low-rank projections norm their latents in the middle of the
  // attention projection chain: they are read with it, so they count with it.
  if (base == "attn_q_a_norm" || base == "attn_kv_a_norm") return TensorPart::kAttention;
  if (base.find("norm") != std::string_view::npos) return TensorPart::kNorms;
  if (StartsWith(base, "attn_")) return TensorPart::kAttention;
  if (StartsWith(base, "ffn_")) return TensorPart::kDenseFfn;
  return TensorPart::kOther;
}

// The split-form expert index of "ffn_up.7", else -1.
int64_t SplitExpertIndex(std::string_view base) {
  size_t dot = base.rfind('.');
  if (dot == std::string_view::npos || !IsSplitExpert(base)) return -1;
  std::string_view digits = base.substr(dot + 1);
  int64_t index = -1;
  ConsumeNumber(&digits, &index);
  return index;
}

// Splits "blk.12.attn_q.weight" into layer 12 and base "attn_q".
void SplitName(std::string_view name, int* layer, std::string_view* base) {
  *layer = -1;
  if (StartsWith(name, "blk.")) {
    std::string_view rest = name.substr(4);
    int64_t index = 0;
    if (ConsumeNumber(&rest, &index) && StartsWith(rest, ".") && index <= (1 << 20)) {
      *layer = static_cast<int>(index);
      name = rest.substr(1);
    }
  }
  for (std::string_view suffix : {".weight", ".bias", ".scale"}) {
    if (EndsWith(name, suffix)) {
      name.remove_suffix(suffix.size());
      break;
    }
  }
  *base = name;
}

// A metadata count, 0 when absent or not an unsigned integer.
int64_t CountOrZero(const storage::GgufFile& gguf, const std::string& key) {
  absl::StatusOr<uint64_t> value = gguf.GetUint(key);
  return value.ok() ? static_cast<int64_t>(*value) : 0;
}

}  // namespace

const char* TensorPartName(TensorPart part) {
  switch (part) {
    case TensorPart::kEmbeddings:
      return "embeddings";
    case TensorPart::kAttention:
      return "attention";
    case TensorPart::kNorms:
      return "norms";
    case TensorPart::kDenseFfn:
      return "dense_ffn";
    case TensorPart::kRouter:
      return "router";
    case TensorPart::kRoutedExperts:
      return "routed_experts";
    case TensorPart::kSharedExperts:
      return "shared_experts";
    case TensorPart::kOutput:
      return "output";
    case TensorPart::kOther:
      return "other";
  }
  return "other";
}

TensorClass ClassifyTensor(std::string_view name) {
  TensorClass result;
  std::string_view base;
  SplitName(name, &result.layer, &base);
  result.part = ClassifyBase(base);
  return result;
}

uint64_t PartBytes::Total() const {
  uint64_t total = 0;
  for (uint64_t b : bytes) total += b;
  return total;
}

absl::StatusOr<ModelLayout> ModelLayout::FromGguf(const storage::GgufFile& gguf) {
  ModelLayout layout;
  absl::StatusOr<std::string> arch = gguf.GetString("general.architecture");
  if (arch.ok()) layout.arch_ = *arch;
  const std::string prefix = layout.arch_ + ".";
  const int64_t block_count = CountOrZero(gguf, prefix + "block_count");
  const int64_t meta_experts = CountOrZero(gguf, prefix + "expert_count");
  layout.experts_used_ = CountOrZero(gguf, prefix + "expert_used_count");
  layout.shared_expert_count_ = CountOrZero(gguf, prefix + "expert_shared_count");
  if (block_count > 0 && block_count <= (1 << 20)) layout.layers_.resize(block_count);
  if (const int64_t nextn = CountOrZero(gguf, prefix + "nextn_predict_layers");
      nextn > 0 && nextn < block_count) {
    layout.first_unread_layer_ = block_count - nextn;
  }

  // Per layer: experts seen in 3-D tensors, and the highest split-form index.
  std::vector<int64_t> split_experts;
  for (const storage::TensorInfo& tensor : gguf.tensors()) {
    TensorClass cls = ClassifyTensor(tensor.name);
    layout.classes_.push_back(cls);
    const int64_t params = tensor.NumElements();
    layout.total_bytes_ += tensor.size;
    layout.total_params_ += params;
    ++layout.tensor_count_;
    layout.parts_[cls.part] += tensor.size;
    if (tensor.name == "token_embd.weight" && tensor.NumRows() > 0) {
      layout.embd_bytes_ = tensor.size;
      layout.embd_row_bytes_ = tensor.size / tensor.NumRows();
    }
    if (tensor.name == "output.weight") layout.has_output_ = true;
    TypeBytes& type = layout.types_[tensor.type];
    ++type.tensors;
    type.bytes += tensor.size;
    type.params += params;
    if (cls.layer < 0) continue;

    if (static_cast<size_t>(cls.layer) >= layout.layers_.size()) {
      layout.layers_.resize(cls.layer + 1);
    }
    LayerLayout& layer = layout.layers_[cls.layer];
    layer.parts[cls.part] += tensor.size;
    layer.bytes += tensor.size;
    if (cls.part != TensorPart::kRoutedExperts) continue;

    if (tensor.shape.size() >= 3) {
      const int64_t n = tensor.shape[2];
      if (meta_experts > 0 && n != meta_experts) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tensor ", tensor.name, " holds ", n, " experts (ne2) but ", prefix, "expert_count is ",
            meta_experts, "; the file is inconsistent, re-convert it"));
      }
      if (layer.n_expert > 0 && n != layer.n_expert) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor ", tensor.name, " holds ", n, " experts (ne2) but layer ",
                         cls.layer, "'s other expert tensors hold ", layer.n_expert));
      }
      layer.n_expert = n;
    } else {
      std::string_view base;
      int unused_layer = 0;
      SplitName(tensor.name, &unused_layer, &base);
      const int64_t index = SplitExpertIndex(base);
      if (split_experts.size() <= static_cast<size_t>(cls.layer)) {
        split_experts.resize(cls.layer + 1, 0);
      }
      split_experts[cls.layer] = std::max(split_experts[cls.layer], index + 1);
    }
  }

  int64_t found_experts = 0;
  for (size_t i = 0; i < layout.layers_.size(); ++i) {
    LayerLayout& layer = layout.layers_[i];
    layer.index = static_cast<int>(i);
    if (layer.n_expert == 0 && i < split_experts.size()) layer.n_expert = split_experts[i];
    const uint64_t routed = layer.parts[TensorPart::kRoutedExperts];
    if (routed == 0 || layer.n_expert <= 0) continue;
    layer.expert_bytes = routed / layer.n_expert;
    ++layout.moe_layer_count_;
    layout.expert_bytes_ = std::max(layout.expert_bytes_, layer.expert_bytes);
    layout.min_expert_bytes_ = layout.min_expert_bytes_ == 0
                                   ? layer.expert_bytes
                                   : std::min(layout.min_expert_bytes_, layer.expert_bytes);
    found_experts = std::max(found_experts, layer.n_expert);
  }
  layout.expert_count_ = meta_experts > 0 ? meta_experts : found_experts;
  return layout;
}

uint64_t ModelLayout::ActiveBytesPerToken() const {
  // A token looks up one row of the embeddings, unless the table is the
  // head as well.
  const uint64_t embd_unread = has_output_ ? embd_bytes_ - embd_row_bytes_ : 0;
  const uint64_t routed = parts_[TensorPart::kRoutedExperts];
  if (routed == 0 || experts_used_ <= 0) return total_bytes_ - embd_unread;
  uint64_t active = total_bytes_ - embd_unread - routed;
  for (int64_t l = 0; l < static_cast<int64_t>(layers_.size()); ++l) {
    const LayerLayout& layer = layers_[l];
    if (l >= first_unread_layer_) {  // Not read at all: its routed bytes are out already.
      active -= layer.bytes - layer.parts[TensorPart::kRoutedExperts];
      continue;
    }
    if (layer.n_expert <= 0) continue;
    const int64_t used = std::min(experts_used_, layer.n_expert);
    active += layer.expert_bytes * static_cast<uint64_t>(used);
  }
  return active;
}

}  // namespace waste::model
