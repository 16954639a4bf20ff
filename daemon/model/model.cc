#include "daemon/model/model.h"

#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "storage/status_macros.h"

namespace waste::model {
namespace {

using storage::TensorInfo;

// Collects the tensors of one chunk while binding them to TensorRefs.
class ChunkBuilder {
 public:
  ChunkBuilder(const storage::GgufFile& gguf, std::vector<cache::ChunkSpec>* chunks,
               uint64_t* weight_bytes, int64_t* max_cols)
      : gguf_(gguf), chunks_(chunks), weight_bytes_(weight_bytes), max_cols_(max_cols) {}

  // Binds `name` with the expected shape {cols, rows} (rows 0 for 1-D). A
  // missing required tensor, a shape mismatch or a type the kernels cannot
  // compute is an error naming the tensor.
  absl::Status Bind(const std::string& name, int64_t cols, int64_t rows, bool required,
                    TensorRef* ref) {
    const TensorInfo* info = gguf_.FindTensor(name);
    if (info == nullptr) {
      if (!required) return absl::OkStatus();
      return absl::InvalidArgumentError(
          absl::StrCat(gguf_.path(), ": tensor '", name, "' is missing"));
    }
    std::vector<int64_t> expected = {cols};
    if (rows > 0) expected.push_back(rows);
    if (info->shape != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          gguf_.path(), ": tensor '", name, "' has shape [", absl::StrJoin(info->shape, ", "),
          "], expected [", absl::StrJoin(expected, ", "), "]"));
    }
    uint32_t type_id = static_cast<uint32_t>(info->type);
    if (!kernels::IsSupportedWeightType(type_id)) {
      return absl::UnimplementedError(absl::StrCat(gguf_.path(), ": tensor '", name, "' has type ",
                                                   std::string(storage::GgmlTypeName(info->type)),
                                                   ", which waste cannot compute yet"));
    }
    ref->present = true;
    ref->type = static_cast<kernels::WeightType>(type_id);
    ref->cols = cols;
    ref->rows = rows > 0 ? rows : 1;
    ref->row_bytes = info->size / ref->rows;
    if (rows == 0 && ref->type != kernels::WeightType::kF32) {
      return absl::UnimplementedError(absl::StrCat(gguf_.path(), ": vector tensor '", name,
                                                   "' must be F32, is ",
                                                   std::string(storage::GgmlTypeName(info->type))));
    }
    *max_cols_ = std::max(*max_cols_, cols);
    tensors_.push_back(info);
    refs_.push_back(ref);
    return absl::OkStatus();
  }

  // Closes the chunk: builds its spec and fixes the placements of its refs.
  cache::ChunkId Finish(std::string name, int layer, cache::ChunkKind kind) {
    cache::ChunkId id = static_cast<cache::ChunkId>(chunks_->size());
    std::vector<cache::TensorPlacement> placements;
    chunks_->push_back(cache::BuildChunkSpec(id, std::move(name), layer, kind, tensors_,
                                             gguf_.file_size(), &placements));
    for (size_t i = 0; i < refs_.size(); ++i) refs_[i]->place = placements[i];
    *weight_bytes_ += chunks_->back().tensor_bytes;
    tensors_.clear();
    refs_.clear();
    return id;
  }

 private:
  const storage::GgufFile& gguf_;
  std::vector<cache::ChunkSpec>* chunks_;
  uint64_t* weight_bytes_;
  int64_t* max_cols_;
  std::vector<const TensorInfo*> tensors_;
  std::vector<TensorRef*> refs_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> Model::Create(const storage::GgufFile& gguf) {
  auto model = std::unique_ptr<Model>(new Model());
  ASSIGN_OR_RETURN(model->hparams_, ReadHParams(gguf));
  const HParams& hp = model->hparams_;
  ChunkBuilder builder(gguf, &model->chunks_, &model->weight_bytes_, &model->max_cols_);

  GlobalTensors& g = model->globals_;
  RETURN_IF_ERROR(builder.Bind("token_embd.weight", hp.n_embd, hp.n_vocab, true, &g.token_embd));
  RETURN_IF_ERROR(builder.Bind("output_norm.weight", hp.n_embd, 0, true, &g.output_norm));
  RETURN_IF_ERROR(builder.Bind("output.weight", hp.n_embd, hp.n_vocab, false, &g.output));
  RETURN_IF_ERROR(builder.Bind("rope_freqs.weight", hp.rope.n_rot / 2, 0, false, &g.rope_freqs));
  g.chunk = builder.Finish("global", -1, cache::ChunkKind::kGlobal);
  if (!g.output.present) g.output = g.token_embd;  // Tied embeddings.

  for (int64_t l = 0; l < hp.n_layer; ++l) {
    LayerTensors layer;
    std::string p = absl::StrCat("blk.", l, ".");
    bool qwen2 = hp.arch == Arch::kQwen2, qwen3 = hp.arch == Arch::kQwen3;
    RETURN_IF_ERROR(builder.Bind(p + "attn_norm.weight", hp.n_embd, 0, true, &layer.attn_norm));
    RETURN_IF_ERROR(builder.Bind(p + "attn_q.weight", hp.n_embd, hp.q_dim(), true, &layer.wq));
    RETURN_IF_ERROR(builder.Bind(p + "attn_k.weight", hp.n_embd, hp.kv_dim(), true, &layer.wk));
    RETURN_IF_ERROR(builder.Bind(p + "attn_v.weight", hp.n_embd, hp.kv_dim(), true, &layer.wv));
    RETURN_IF_ERROR(builder.Bind(p + "attn_output.weight", hp.q_dim(), hp.n_embd, true, &layer.wo));
    RETURN_IF_ERROR(builder.Bind(p + "attn_q.bias", hp.q_dim(), 0, qwen2, &layer.bq));
    RETURN_IF_ERROR(builder.Bind(p + "attn_k.bias", hp.kv_dim(), 0, qwen2, &layer.bk));
    RETURN_IF_ERROR(builder.Bind(p + "attn_v.bias", hp.kv_dim(), 0, qwen2, &layer.bv));
    RETURN_IF_ERROR(builder.Bind(p + "attn_q_norm.weight", hp.head_dim, 0, qwen3, &layer.q_norm));
    RETURN_IF_ERROR(builder.Bind(p + "attn_k_norm.weight", hp.head_dim, 0, qwen3, &layer.k_norm));
    layer.attn_chunk =
        builder.Finish(p + "attn", static_cast<int>(l), cache::ChunkKind::kAttention);

    RETURN_IF_ERROR(builder.Bind(p + "ffn_norm.weight", hp.n_embd, 0, true, &layer.ffn_norm));
    RETURN_IF_ERROR(builder.Bind(p + "ffn_gate.weight", hp.n_embd, hp.n_ff, true, &layer.gate));
    RETURN_IF_ERROR(builder.Bind(p + "ffn_up.weight", hp.n_embd, hp.n_ff, true, &layer.up));
    RETURN_IF_ERROR(builder.Bind(p + "ffn_down.weight", hp.n_ff, hp.n_embd, true, &layer.down));
    layer.ffn_chunk = builder.Finish(p + "ffn", static_cast<int>(l), cache::ChunkKind::kFfn);
    model->layers_.push_back(layer);
  }
  return model;
}

}  // namespace waste::model
