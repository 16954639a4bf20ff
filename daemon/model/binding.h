// Internal to daemon/model: binds GGUF tensors to TensorRefs while grouping
// them into chunks. Model::Create drives it; the MoE and MLA blocks have
// their own binding functions (binding.cc) so model.cc stays about the
// dense transformer.
#ifndef WASTE_DAEMON_MODEL_BINDING_H_
#define WASTE_DAEMON_MODEL_BINDING_H_

#include <deque>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/memory/chunk_spec.h"
#include "daemon/model/model.h"
#include "storage/gguf.h"

namespace waste::model::internal {

// Collects the tensors of one chunk while binding them to TensorRefs.
class ChunkBuilder {
 public:
  ChunkBuilder(const storage::GgufFile& gguf, std::vector<memory::ChunkSpec>* chunks,
               uint64_t* weight_bytes, int64_t* max_cols)
      : gguf_(gguf), chunks_(chunks), weight_bytes_(weight_bytes), max_cols_(max_cols) {}

  // Binds `name` with the expected shape {cols, rows} (rows 0 for 1-D) into
  // the open chunk. A missing required tensor, a shape mismatch or a type
  // the kernels cannot compute is an error naming the tensor.
  absl::Status Bind(const std::string& name, int64_t cols, int64_t rows, bool required,
                    TensorRef* ref);

  // A 3-D tensor {cols, rows, n}: n matrices of rows x cols (experts, or
  // MLA's per-head attn_k_b/attn_v_b). ref->rows is one matrix's rows and
  // ref->n_mat is n. With `whole` the tensor joins the open chunk; without,
  // nothing is added and `info` is set so slices can go to other chunks
  // (AddSlice).
  absl::Status BindStacked(const std::string& name, int64_t cols, int64_t rows, int64_t n,
                           bool whole, TensorRef* ref, const storage::TensorInfo** info);

  // A 2-D F32 tensor {cols, n} of one row per expert (gpt-oss's expert
  // biases): ref describes one row (rows 1, n_mat n), to be added to the
  // experts' chunks with AddSlice; nothing joins the open chunk.
  absl::Status BindExpertRows(const std::string& name, int64_t cols, int64_t n, TensorRef* ref,
                              const storage::TensorInfo** info);

  // Adds matrix `index` of a stacked tensor to the open chunk; its placement
  // lands in *slot_offset when the chunk is finished.
  void AddSlice(const storage::TensorInfo& whole, const TensorRef& ref, int64_t index,
                uint64_t* slot_offset);

  // Closes the chunk: builds its spec and fixes the placements of its refs.
  // Extents closer than `merge_gap` are read in one run (see
  // memory::BuildChunkSpec).
  memory::ChunkId Finish(std::string name, int layer, memory::ChunkKind kind,
                         uint64_t merge_gap = 1 << 20);

 private:
  absl::Status CheckType(const std::string& name, const storage::TensorInfo& info) const;
  // `name` with the given shape and a type the kernels compute; null when
  // absent and not `required`.
  absl::StatusOr<const storage::TensorInfo*> Find(const std::string& name,
                                                  const std::vector<int64_t>& shape,
                                                  bool required) const;
  // `info` joins the open chunk; ref's placement is set at Finish.
  void Queue(const storage::TensorInfo* info, TensorRef* ref);

  const storage::GgufFile& gguf_;
  std::vector<memory::ChunkSpec>* chunks_;
  uint64_t* weight_bytes_;
  int64_t* max_cols_;
  std::vector<const storage::TensorInfo*> tensors_;
  std::vector<uint64_t*> offsets_;           // Where each tensor's slot offset goes.
  std::vector<memory::ChunkId*> chunk_ids_;  // TensorRefs' place.chunk, set by Finish.
  std::deque<storage::TensorInfo> slices_;   // Stable addresses for tensors_.
};

// deepseek2's attention block (MLA) of layer `l` into the open chunk.
absl::Status BindMlaAttention(ChunkBuilder* builder, const HParams& hp, int64_t l,
                              LayerTensors* layer);

// The norm before a block's FFN: ffn_norm, or post_attention_norm in
// gpt-oss and glm4moe files.
std::string FfnNormName(const HParams& hp, int64_t l);

// A MoE feed-forward block of layer `l`: ffn_norm, router, expert bias and
// shared expert in one chunk (layer->ffn_chunk), then one kExpert chunk per
// routed expert with its gate/up/down slices (layer->experts).
absl::Status BindMoeBlock(ChunkBuilder* builder, const HParams& hp, int64_t l, LayerTensors* layer);

}  // namespace waste::model::internal

#endif  // WASTE_DAEMON_MODEL_BINDING_H_
