// A transformer (llama, qwen2, qwen3, gemma 1-3, and the mixture-of-experts mixtral,
// qwen2moe, qwen3moe, deepseek2 with MLA and gpt-oss) bound to a GGUF file: its
// hyperparameters, every weight tensor checked for shape and type, and the
// chunks the weights are read in: one global chunk, then per layer an
// attention chunk and an FFN chunk (for a MoE layer: the trunk of norm,
// router and shared expert), then per routed expert one kExpert chunk with
// its slices of the 3-D expert tensors. Holds no weight bytes: those come
// from a ChunkStore while the forward pass runs.
//
// Immutable after Create; safe to share between threads.
#ifndef WASTE_DAEMON_MODEL_MODEL_H_
#define WASTE_DAEMON_MODEL_MODEL_H_

#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "daemon/kernels/matvec.h"
#include "daemon/memory/chunk_spec.h"
#include "daemon/model/hparams.h"
#include "storage/gguf.h"

namespace waste::model {

// A tensor inside its chunk's slot.
struct TensorRef {
  bool present = false;
  kernels::WeightType type = kernels::WeightType::kF32;
  int64_t rows = 0;   // ggml ne1: rows of one matrix.
  int64_t cols = 0;   // ggml ne0
  int64_t n_mat = 1;  // ggml ne2 of a stacked 3-D tensor (experts, heads).
  uint64_t row_bytes = 0;
  memory::TensorPlacement place;
  // A 2-D matrix the forward pass reads only through products, of a type
  // and width the kernels can interleave: a chunk the loader repacks holds
  // it in interleaved_layout (resident_layout.h).
  bool interleaves = false;
  kernels::WeightLayout interleaved_layout = kernels::WeightLayout::kInterleaved;

  const uint8_t* Data(const uint8_t* slot) const { return slot + place.slot_offset; }
  // `repacked`: the slot is a repacked chunk's (ChunkLease::View).
  kernels::WeightView View(const uint8_t* slot, bool repacked = false) const {
    kernels::WeightView view = kernels::DenseWeightView(type, rows, cols, Data(slot));
    if (repacked && interleaves) view.layout = interleaved_layout;
    return view;
  }
  // Rows [first, first + rows) of a 2-D tensor (a head's part of wkv_b).
  kernels::WeightView RowsView(const uint8_t* slot, int64_t first, int64_t rows) const {
    return kernels::DenseWeightView(type, rows, cols, Data(slot) + first * row_bytes);
  }
  // Matrix `i` of a stacked tensor bound whole.
  kernels::WeightView MatrixView(const uint8_t* slot, int64_t i) const {
    return kernels::DenseWeightView(type, rows, cols, Data(slot) + i * rows * row_bytes);
  }
  // One matrix that sits at `data` (an expert's slice in its own chunk).
  kernels::WeightView ViewAt(const uint8_t* data) const {
    return kernels::DenseWeightView(type, rows, cols, data);
  }
  const float* F32(const uint8_t* slot) const { return reinterpret_cast<const float*>(Data(slot)); }
};

// One routed expert: its chunk and where its slices of ffn_{gate,up,down}_exps
// sit in that chunk's slot.
struct ExpertRef {
  memory::ChunkId chunk = 0;
  uint64_t gate_offset = 0;
  uint64_t up_offset = 0;
  uint64_t down_offset = 0;
  // gpt-oss: the expert's rows of ffn_{gate,up,down}_exps.bias (F32), in its
  // chunk too, when LayerTensors::gate_exps_b is present.
  uint64_t gate_bias_offset = 0;
  uint64_t up_bias_offset = 0;
  uint64_t down_bias_offset = 0;
};

struct LayerTensors {
  memory::ChunkId attn_chunk = 0;
  memory::ChunkId ffn_chunk = 0;
  TensorRef attn_norm, wq, wk, wv, wo;
  TensorRef bq, bk, bv;      // qwen2, gpt-oss
  TensorRef bo, sinks;       // gpt-oss: output bias, a sink logit per head
  TensorRef q_norm, k_norm;  // qwen3, gemma3
  TensorRef ffn_norm, gate, up, down;
  // gemma2/3: norms of the attention's output (in attn_chunk) and of the
  // FFN's (in ffn_chunk) before their residual adds.
  TensorRef attn_post_norm, ffn_post_norm;

  // MLA (deepseek2), in attn_chunk. wq is used when q_lora_rank is 0.
  // wk_b: n_head matrices [kv_lora_rank x qk_nope]; wv_b: n_head matrices
  // [v_head x kv_lora_rank]; or, in files with mla.fused_kv_b, neither but
  // wkv_b [n_head * (qk_nope + v_head) x kv_lora_rank] (per head W_k_b^T's
  // rows, then W_v_b's).
  TensorRef wq_a, q_a_norm, wq_b, wkv_a_mqa, kv_a_norm, wk_b, wv_b, wkv_b;

  // MoE block, when hparams.IsMoeLayer: router [n_expert x n_embd] (F32),
  // its bias (gpt-oss), the selection bias, the shared expert and its
  // sigmoid gate in ffn_chunk. ffn_norm is gpt-oss's post_attention_norm.
  TensorRef router, router_bias, expert_bias;
  TensorRef gate_shexp, up_shexp, down_shexp, gate_inp_shexp;
  // Shape and type of one expert's slice; the bytes are in experts[e]'s chunk.
  TensorRef gate_exps, up_exps, down_exps;
  // gpt-oss: shape and type of one expert's bias row (1 x rows of its matrix).
  TensorRef gate_exps_b, up_exps_b, down_exps_b;
  std::vector<ExpertRef> experts;
};

struct GlobalTensors {
  memory::ChunkId chunk = 0;
  // token_embd's chunk: `chunk` when the embeddings are tied to the output
  // head, else a chunk of its own (ChunkKind::kEmbeddings) whose rows are
  // read as tokens need them.
  memory::ChunkId embd_chunk = 0;
  bool embd_separate() const { return embd_chunk != chunk; }
  TensorRef token_embd, output_norm, output;  // output may be token_embd (tied).
  TensorRef rope_freqs;                       // Optional (llama3).
};

class Model {
 public:
  static absl::StatusOr<std::unique_ptr<Model>> Create(const storage::GgufFile& gguf);

  const HParams& hparams() const { return hparams_; }
  const GlobalTensors& globals() const { return globals_; }
  const std::vector<LayerTensors>& layers() const { return layers_; }
  const std::vector<memory::ChunkSpec>& chunks() const { return chunks_; }
  // Bytes of all weight tensors.
  uint64_t weight_bytes() const { return weight_bytes_; }
  // The widest matrix row (for sizing matvec scratch) and widest output.
  int64_t max_cols() const { return max_cols_; }

 private:
  Model() = default;
  // Sets TensorRef::interleaves on the matrices that take it.
  static void MarkInterleaving(Model* model);

  HParams hparams_;
  GlobalTensors globals_;
  std::vector<LayerTensors> layers_;
  std::vector<memory::ChunkSpec> chunks_;
  uint64_t weight_bytes_ = 0;
  int64_t max_cols_ = 0;
};

// Calls `fn` for every tensor of the model bound as a TensorRef in the
// chunk its `place` names (globals, attention, FFN and MoE trunk, MLA), not
// for the expert shape templates gate_exps/up_exps/down_exps (their bytes
// are slices in the expert chunks). Absent tensors are skipped.
void ForEachTensor(const Model& model, absl::FunctionRef<void(const TensorRef&)> fn);

// Rewrites the matrices of chunk `id` that interleave (TensorRef::interleaves)
// into the kInterleaved layout, in place in `slot`: what a store's
// repack_pinned does to a resident chunk, once, at load. The chunk's products
// then come out bit-identical and faster; nothing else may read its matrices'
// bytes (the device tier reads its own copy from the file).
void InterleaveChunk(const Model& model, memory::ChunkId id, uint8_t* slot);

}  // namespace waste::model

#endif  // WASTE_DAEMON_MODEL_MODEL_H_
