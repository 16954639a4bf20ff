#include "daemon/model/binding.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace waste::model::internal {

using storage::TensorInfo;

absl::Status ChunkBuilder::CheckType(const std::string& name, const TensorInfo& info) const {
  if (kernels::IsSupportedWeightType(static_cast<uint32_t>(info.type))) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(gguf_.path(), ": tensor '", name, "' has type ",
                                               std::string(storage::GgmlTypeName(info.type)),
                                               ", which waste cannot compute yet"));
}

absl::StatusOr<const TensorInfo*> ChunkBuilder::Find(const std::string& name,
                                                     const std::vector<int64_t>& shape,
                                                     bool required) const {
  const TensorInfo* info = gguf_.FindTensor(name);
  if (info == nullptr) {
    if (!required) return nullptr;
    return absl::InvalidArgumentError(
        absl::StrCat(gguf_.path(), ": tensor '", name, "' is missing"));
  }
  if (info->shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        gguf_.path(), ": tensor '", name, "' has shape [", absl::StrJoin(info->shape, ", "),
        "], expected [", absl::StrJoin(shape, ", "), "]"));
  }
  RETURN_IF_ERROR(CheckType(name, *info));
  return info;
}

void ChunkBuilder::Queue(const TensorInfo* info, TensorRef* ref) {
  tensors_.push_back(info);
  offsets_.push_back(&ref->place.slot_offset);
  chunk_ids_.push_back(&ref->place.chunk);
}

absl::Status ChunkBuilder::Bind(const std::string& name, int64_t cols, int64_t rows, bool required,
                                TensorRef* ref) {
  std::vector<int64_t> expected = {cols};
  if (rows > 0) expected.push_back(rows);
  ASSIGN_OR_RETURN(const TensorInfo* info, Find(name, expected, required));
  if (info == nullptr) return absl::OkStatus();
  ref->present = true;
  ref->type = static_cast<kernels::WeightType>(info->type);
  ref->cols = cols;
  ref->rows = rows > 0 ? rows : 1;
  ref->row_bytes = info->size / ref->rows;
  if (rows == 0 && ref->type != kernels::WeightType::kF32) {
    return absl::UnimplementedError(absl::StrCat(gguf_.path(), ": vector tensor '", name,
                                                 "' must be F32, is ",
                                                 std::string(storage::GgmlTypeName(info->type))));
  }
  *max_cols_ = std::max(*max_cols_, cols);
  Queue(info, ref);
  return absl::OkStatus();
}

absl::Status ChunkBuilder::BindStacked(const std::string& name, int64_t cols, int64_t rows,
                                       int64_t n, bool whole, TensorRef* ref,
                                       const TensorInfo** info_out) {
  ASSIGN_OR_RETURN(const TensorInfo* info, Find(name, {cols, rows, n}, /*required=*/true));
  ref->present = true;
  ref->type = static_cast<kernels::WeightType>(info->type);
  ref->cols = cols;
  ref->rows = rows;
  ref->n_mat = n;
  ref->row_bytes = info->size / (rows * n);
  *max_cols_ = std::max(*max_cols_, cols);
  if (whole) Queue(info, ref);
  if (info_out != nullptr) *info_out = info;
  return absl::OkStatus();
}

absl::Status ChunkBuilder::BindExpertRows(const std::string& name, int64_t cols, int64_t n,
                                          TensorRef* ref, const TensorInfo** info_out) {
  ASSIGN_OR_RETURN(const TensorInfo* info, Find(name, {cols, n}, /*required=*/true));
  if (info->type != storage::GgmlType::kF32) {
    return absl::UnimplementedError(
        absl::StrCat(gguf_.path(), ": expert bias '", name, "' must be F32"));
  }
  ref->present = true;
  ref->type = kernels::WeightType::kF32;
  ref->cols = cols;
  ref->rows = 1;
  ref->n_mat = n;
  ref->row_bytes = info->size / n;
  *max_cols_ = std::max(*max_cols_, cols);
  *info_out = info;
  return absl::OkStatus();
}

void ChunkBuilder::AddSlice(const TensorInfo& whole, const TensorRef& ref, int64_t index,
                            uint64_t* slot_offset) {
  const uint64_t bytes = ref.rows * ref.row_bytes;
  TensorInfo& slice = slices_.emplace_back();
  slice.name = absl::StrCat(whole.name, "[", index, "]");
  slice.type = whole.type;
  slice.shape = {ref.cols, ref.rows};
  slice.offset = whole.offset + index * bytes;
  slice.size = bytes;
  tensors_.push_back(&slice);
  offsets_.push_back(slot_offset);
}

memory::ChunkId ChunkBuilder::Finish(std::string name, int layer, memory::ChunkKind kind,
                                     uint64_t merge_gap) {
  memory::ChunkId id = static_cast<memory::ChunkId>(chunks_->size());
  std::vector<memory::TensorPlacement> placements;
  chunks_->push_back(memory::BuildChunkSpec(id, std::move(name), layer, kind, tensors_,
                                            gguf_.file_size(), &placements, merge_gap));
  for (size_t i = 0; i < offsets_.size(); ++i) *offsets_[i] = placements[i].slot_offset;
  for (memory::ChunkId* chunk : chunk_ids_) *chunk = id;
  *weight_bytes_ += chunks_->back().tensor_bytes;
  tensors_.clear();
  offsets_.clear();
  chunk_ids_.clear();
  slices_.clear();
  return id;
}

absl::Status BindMlaAttention(ChunkBuilder* b, const HParams& hp, int64_t l, LayerTensors* layer) {
  const MlaParams& mla = hp.mla;
  const std::string p = absl::StrCat("blk.", l, ".");
  const int64_t q_head = mla.qk_nope + mla.qk_rope;
  if (mla.q_lora_rank > 0) {
    RETURN_IF_ERROR(b->Bind(p + "attn_q_a.weight", hp.n_embd, mla.q_lora_rank, true, &layer->wq_a));
    RETURN_IF_ERROR(
        b->Bind(p + "attn_q_a_norm.weight", mla.q_lora_rank, 0, true, &layer->q_a_norm));
    RETURN_IF_ERROR(
        b->Bind(p + "attn_q_b.weight", mla.q_lora_rank, hp.n_head * q_head, true, &layer->wq_b));
  } else {
    RETURN_IF_ERROR(b->Bind(p + "attn_q.weight", hp.n_embd, hp.n_head * q_head, true, &layer->wq));
  }
  RETURN_IF_ERROR(b->Bind(p + "attn_kv_a_mqa.weight", hp.n_embd, mla.kv_lora_rank + mla.qk_rope,
                          true, &layer->wkv_a_mqa));
  RETURN_IF_ERROR(
      b->Bind(p + "attn_kv_a_norm.weight", mla.kv_lora_rank, 0, true, &layer->kv_a_norm));
  if (mla.fused_kv_b) {
    RETURN_IF_ERROR(b->Bind(p + "attn_kv_b.weight", mla.kv_lora_rank,
                            hp.n_head * (mla.qk_nope + mla.v_head), true, &layer->wkv_b));
  } else {
    RETURN_IF_ERROR(b->BindStacked(p + "attn_k_b.weight", mla.qk_nope, mla.kv_lora_rank, hp.n_head,
                                   /*whole=*/true, &layer->wk_b, nullptr));
    RETURN_IF_ERROR(b->BindStacked(p + "attn_v_b.weight", mla.kv_lora_rank, mla.v_head, hp.n_head,
                                   /*whole=*/true, &layer->wv_b, nullptr));
  }
  return b->Bind(p + "attn_output.weight", hp.n_head * mla.v_head, hp.n_embd, true, &layer->wo);
}

std::string FfnNormName(const HParams& hp, int64_t l) {
  const bool post = hp.arch == Arch::kGptOss || hp.arch == Arch::kGlm4Moe;
  return absl::StrCat("blk.", l, post ? ".post_attention_norm.weight" : ".ffn_norm.weight");
}

absl::Status BindMoeBlock(ChunkBuilder* b, const HParams& hp, int64_t l, LayerTensors* layer) {
  const MoeParams& moe = hp.moe;
  const std::string p = absl::StrCat("blk.", l, ".");
  const int layer_index = static_cast<int>(l);
  const bool gpt_oss = hp.arch == Arch::kGptOss;
  RETURN_IF_ERROR(b->Bind(FfnNormName(hp, l), hp.n_embd, 0, true, &layer->ffn_norm));
  RETURN_IF_ERROR(
      b->Bind(p + "ffn_gate_inp.weight", hp.n_embd, moe.n_expert, true, &layer->router));
  RETURN_IF_ERROR(b->Bind(p + "ffn_gate_inp.bias", moe.n_expert, 0, gpt_oss, &layer->router_bias));
  if (layer->router.type != kernels::WeightType::kF32) {
    // Routing decides which chunks are read: keep it exact, as converters do.
    return absl::UnimplementedError(
        absl::StrCat(hp.arch_name, ": router '", p, "ffn_gate_inp.weight' must be F32"));
  }
  RETURN_IF_ERROR(b->Bind(p + "exp_probs_b.bias", moe.n_expert, 0, false, &layer->expert_bias));
  if (moe.n_ff_shexp > 0) {
    RETURN_IF_ERROR(
        b->Bind(p + "ffn_gate_shexp.weight", hp.n_embd, moe.n_ff_shexp, true, &layer->gate_shexp));
    RETURN_IF_ERROR(
        b->Bind(p + "ffn_up_shexp.weight", hp.n_embd, moe.n_ff_shexp, true, &layer->up_shexp));
    RETURN_IF_ERROR(
        b->Bind(p + "ffn_down_shexp.weight", moe.n_ff_shexp, hp.n_embd, true, &layer->down_shexp));
    RETURN_IF_ERROR(b->Bind(p + "ffn_gate_inp_shexp.weight", hp.n_embd, 0,
                            hp.arch == Arch::kQwen2Moe, &layer->gate_inp_shexp));
  }
  const TensorInfo *gate = nullptr, *up = nullptr, *down = nullptr;
  RETURN_IF_ERROR(b->BindStacked(p + "ffn_gate_exps.weight", hp.n_embd, moe.n_ff_exp, moe.n_expert,
                                 false, &layer->gate_exps, &gate));
  RETURN_IF_ERROR(b->BindStacked(p + "ffn_up_exps.weight", hp.n_embd, moe.n_ff_exp, moe.n_expert,
                                 false, &layer->up_exps, &up));
  RETURN_IF_ERROR(b->BindStacked(p + "ffn_down_exps.weight", moe.n_ff_exp, hp.n_embd, moe.n_expert,
                                 false, &layer->down_exps, &down));
  const TensorInfo *gate_b = nullptr, *up_b = nullptr, *down_b = nullptr;
  if (gpt_oss) {
    RETURN_IF_ERROR(b->BindExpertRows(p + "ffn_gate_exps.bias", moe.n_ff_exp, moe.n_expert,
                                      &layer->gate_exps_b, &gate_b));
    RETURN_IF_ERROR(b->BindExpertRows(p + "ffn_up_exps.bias", moe.n_ff_exp, moe.n_expert,
                                      &layer->up_exps_b, &up_b));
    RETURN_IF_ERROR(b->BindExpertRows(p + "ffn_down_exps.bias", hp.n_embd, moe.n_expert,
                                      &layer->down_exps_b, &down_b));
  }
  layer->ffn_chunk = b->Finish(p + "ffn", layer_index, memory::ChunkKind::kFfn);

  layer->experts.resize(moe.n_expert);
  for (int64_t e = 0; e < moe.n_expert; ++e) {
    ExpertRef& expert = layer->experts[e];
    b->AddSlice(*gate, layer->gate_exps, e, &expert.gate_offset);
    b->AddSlice(*up, layer->up_exps, e, &expert.up_offset);
    b->AddSlice(*down, layer->down_exps, e, &expert.down_offset);
    if (gate_b != nullptr) {
      b->AddSlice(*gate_b, layer->gate_exps_b, e, &expert.gate_bias_offset);
      b->AddSlice(*up_b, layer->up_exps_b, e, &expert.up_bias_offset);
      b->AddSlice(*down_b, layer->down_exps_b, e, &expert.down_bias_offset);
    }
    // No merging: the bytes between an expert's slices are other experts'.
    expert.chunk = b->Finish(absl::StrCat(p, "expert.", e), layer_index, memory::ChunkKind::kExpert,
                             /*merge_gap=*/0);
  }
  return absl::OkStatus();
}

}  // namespace waste::model::internal
