// A dense transformer (llama, qwen2, qwen3) bound to a GGUF file: its
// hyperparameters, every weight tensor checked for shape and type, and the
// chunks the weights are read in (one global chunk, then per layer an
// attention chunk and an FFN chunk). Holds no weight bytes: those come from
// a ChunkStore while the forward pass runs.
//
// Immutable after Create; safe to share between threads.
#ifndef WASTE_DAEMON_MODEL_MODEL_H_
#define WASTE_DAEMON_MODEL_MODEL_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/cache/chunk.h"
#include "daemon/kernels/matvec.h"
#include "daemon/model/hparams.h"
#include "storage/gguf.h"

namespace waste::model {

// A tensor inside its chunk's slot.
struct TensorRef {
  bool present = false;
  kernels::WeightType type = kernels::WeightType::kF32;
  int64_t rows = 0;  // ggml ne1 (product of ne1.. for >2-D)
  int64_t cols = 0;  // ggml ne0
  uint64_t row_bytes = 0;
  cache::TensorPlacement place;

  const uint8_t* Data(const uint8_t* slot) const { return slot + place.slot_offset; }
  kernels::WeightView View(const uint8_t* slot) const {
    return kernels::DenseWeightView(type, rows, cols, Data(slot));
  }
  const float* F32(const uint8_t* slot) const { return reinterpret_cast<const float*>(Data(slot)); }
};

struct LayerTensors {
  cache::ChunkId attn_chunk = 0;
  cache::ChunkId ffn_chunk = 0;
  TensorRef attn_norm, wq, wk, wv, wo;
  TensorRef bq, bk, bv;      // qwen2
  TensorRef q_norm, k_norm;  // qwen3
  TensorRef ffn_norm, gate, up, down;
};

struct GlobalTensors {
  cache::ChunkId chunk = 0;
  TensorRef token_embd, output_norm, output;  // output may be token_embd (tied).
  TensorRef rope_freqs;                       // Optional (llama3).
};

class Model {
 public:
  static absl::StatusOr<std::unique_ptr<Model>> Create(const storage::GgufFile& gguf);

  const HParams& hparams() const { return hparams_; }
  const GlobalTensors& globals() const { return globals_; }
  const std::vector<LayerTensors>& layers() const { return layers_; }
  const std::vector<cache::ChunkSpec>& chunks() const { return chunks_; }
  // Bytes of all weight tensors.
  uint64_t weight_bytes() const { return weight_bytes_; }
  // The widest matrix row (for sizing matvec scratch) and widest output.
  int64_t max_cols() const { return max_cols_; }

 private:
  Model() = default;

  HParams hparams_;
  GlobalTensors globals_;
  std::vector<LayerTensors> layers_;
  std::vector<cache::ChunkSpec> chunks_;
  uint64_t weight_bytes_ = 0;
  int64_t max_cols_ = 0;
};

}  // namespace waste::model

#endif  // WASTE_DAEMON_MODEL_MODEL_H_
