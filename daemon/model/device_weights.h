// The VRAM tier at run time: the chunks a memory plan put in VRAM
// (MemoryPlan::in_vram), uploaded once to a gpu::Device, and the answer to
// the forward pass's question "where does this chunk live". For a chunk on
// the device, Forward runs every weight product on the device
// (DeviceWeights::MatMul) and reads the chunk's vectors (norms, biases; F32,
// one row) from a host shadow of the slot: an anonymous mapping the size of
// the slot, of which only the pages holding those vectors are ever
// touched. Everything else of the step (norms, rope, attention with its KV
// cache, routing, the experts not in VRAM) stays on the CPU, so a model
// with no DeviceWeights, or with nothing in VRAM, runs exactly as before.
//
// A product's activations go up and its result comes back through pinned
// buffers on the compute stream, synchronously: the host needs each result
// for the next step of the layer.
//
// Thread-safety: the engine thread that runs the model's Forward.
#ifndef WASTE_DAEMON_MODEL_DEVICE_WEIGHTS_H_
#define WASTE_DAEMON_MODEL_DEVICE_WEIGHTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/gpu/device.h"
#include "daemon/kernels/matvec.h"
#include "daemon/model/model.h"
#include "storage/env.h"

namespace waste::model {

// Opens the device a VRAM tier runs on: "cuda" (CUDA device 0;
// UNAVAILABLE, saying why, when the binary was built without --config=cuda
// or the machine has no usable GPU) or "fake" (gpu::FakeDevice with
// `fake_memory_bytes`: the CPU computing as a GPU would, for tests and for
// trying a plan's placement on a machine without one). The engine and the
// bench open devices here, so nothing above model/ names CUDA.
absl::StatusOr<std::unique_ptr<gpu::Device>> OpenDevice(const std::string& kind,
                                                        uint64_t fake_memory_bytes = 0);

struct DeviceWeightsStats {
  int chunks = 0;                // Resident on the device.
  uint64_t resident_bytes = 0;   // Their slots.
  double load_seconds = 0;       // Reading and uploading them.
  int64_t products = 0;          // Weight products run on the device (VRAM hits).
  int64_t product_bytes = 0;     // Weight bytes those products read from VRAM.
  int64_t activation_bytes = 0;  // Activations up and results down.
  double product_seconds = 0;    // Host time in device products (issue to result).
  int64_t row_reads = 0;         // Embedding rows fetched from the device.
  int64_t synchronizations = 0;  // Host waits for product results.
};

class DeviceWeights {
 public:
  // Reads the chunks with in_vram[id] from `file` and uploads them (through
  // pinned staging, on the copy stream), and allocates the activation
  // buffers of a step of up to `max_step_tokens` rows. Chunks with a matrix
  // of a type the device cannot compute are INVALID_ARGUMENT (the plan's
  // vram_eligible keeps them out). `device` must outlive this.
  static absl::StatusOr<std::unique_ptr<DeviceWeights>> Load(gpu::Device* device,
                                                             const Model& model,
                                                             const storage::RandomAccessFile& file,
                                                             const std::vector<bool>& in_vram,
                                                             int64_t max_step_tokens);
  ~DeviceWeights();
  DeviceWeights(const DeviceWeights&) = delete;
  DeviceWeights& operator=(const DeviceWeights&) = delete;

  // Device memory the step's activations take (PlanInput::vram_scratch_bytes).
  static uint64_t ScratchBytes(const Model& model, int64_t max_step_tokens);
  // Whether a device can hold chunk `id` (every matrix in it of a type
  // gpu::DeviceComputes, and no fused MLA attn_kv_b), by ChunkId
  // (PlanInput::vram_eligible).
  static std::vector<bool> Eligible(const Model& model);

  bool OnDevice(memory::ChunkId id) const {
    return id >= 0 && static_cast<size_t>(id) < chunks_.size() && chunks_[id].base;
  }
  // The host shadow of a chunk on the device: valid for its vectors only.
  const uint8_t* HostSlot(memory::ChunkId id) const { return chunks_[id].shadow; }

  // y = W x on the device, W the matrix `shape` describes at `offset` in
  // chunk `id`'s slot; x, y host memory as kernels::MatMul's. x is read
  // before it returns; y is written before it returns, or inside a batch
  // at its EndBatch (a product's errors come there too).
  absl::Status MatMul(memory::ChunkId id, uint64_t offset, const kernels::WeightView& shape,
                      const float* x, int64_t x_stride, int64_t n, float* y, int64_t y_stride);

  // Products between BeginBatch and EndBatch are issued together at its end:
  // one copy of their inputs (an input the product before it had is staged
  // once), their kernels, one copy of their outputs and one synchronization
  // (a batch too big for the staging buffers takes more). For independent
  // products only (q, k, v; gate and up; MLA's per-head products): a
  // product's input must not be an earlier one's output, and stays as it is
  // until EndBatch. Nests; EndBatch of the outermost delivers.
  void BeginBatch();
  absl::Status EndBatch();
  // `bytes` at `offset` of chunk `id`'s slot (an embedding row), copied to
  // a host buffer of this object, valid until the next ReadRow.
  absl::StatusOr<const uint8_t*> ReadRow(memory::ChunkId id, uint64_t offset, uint64_t bytes);

  gpu::Device* device() const { return device_; }
  const DeviceWeightsStats& stats() const { return stats_; }

 private:
  struct Chunk {
    gpu::DevicePtr base;
    uint8_t* shadow = nullptr;
    uint64_t shadow_bytes = 0;
  };
  // A product asked for and not yet delivered to its y: its input staged
  // at x_offset floats into x_host_ (and x_), its output to come at
  // y_offset into y_ (and y_host_).
  struct Pending {
    float* y;
    int64_t y_stride, n, rows;
    int64_t y_offset;
    const float* x = nullptr;
    int64_t x_stride = 0, cols = 0, x_offset = 0;
    gpu::DeviceMatrix matrix;
  };
  explicit DeviceWeights(gpu::Device* device) : device_(device) {}
  // Waits for the issued products and delivers their results.
  absl::Status Flush();

  gpu::Device* device_;
  std::vector<Chunk> chunks_;  // By ChunkId; base null when not on the device.
  int64_t max_rows_ = 0;       // Of a step.
  int64_t max_cols_ = 0;       // Widest input of a product.
  int64_t max_out_ = 0;        // Widest output of a product.
  gpu::DevicePtr x_, y_;       // Device activations.
  float* x_host_ = nullptr;    // Pinned staging for them.
  float* y_host_ = nullptr;
  uint8_t* row_host_ = nullptr;  // Pinned, for ReadRow.
  int batch_depth_ = 0;
  std::vector<Pending> pending_;
  int64_t x_used_ = 0, y_used_ = 0;  // Floats of the staging taken by pending_.
  uint64_t row_bytes_ = 0;
  uint8_t* shadow_map_ = nullptr;  // Every chunk's shadow, one mapping.
  uint64_t shadow_map_bytes_ = 0;
  DeviceWeightsStats stats_;
};

}  // namespace waste::model

#endif  // WASTE_DAEMON_MODEL_DEVICE_WEIGHTS_H_
