#include "daemon/model/device_weights.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/gpu/cuda/cuda_device.h"
#include "daemon/gpu/fake_device.h"

namespace waste::model {
namespace {

// Staging for the upload: two pinned buffers, one filling from the file
// while the other is copied up.
constexpr uint64_t kStagingBytes = uint64_t{16} << 20;

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Widest input and output of any product of the model.
void ProductSizes(const Model& model, int64_t* max_cols, int64_t* max_out) {
  *max_cols = 1;
  *max_out = 1;
  auto consider = [&](const TensorRef& t) {
    if (!t.present || t.rows <= 1) return;
    *max_cols = std::max(*max_cols, t.cols);
    *max_out = std::max(*max_out, t.rows);
  };
  ForEachTensor(model, consider);
  for (const LayerTensors& l : model.layers()) {
    for (const TensorRef* t : {&l.gate_exps, &l.up_exps, &l.down_exps}) consider(*t);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<gpu::Device>> OpenDevice(const std::string& kind,
                                                        uint64_t fake_memory_bytes) {
  if (kind == "cuda") return gpu::OpenCudaDevice(0);
  if (kind == "fake") {
    gpu::FakeDeviceOptions options;
    if (fake_memory_bytes > 0) options.memory_bytes = fake_memory_bytes;
    return std::unique_ptr<gpu::Device>(std::make_unique<gpu::FakeDevice>(options));
  }
  return absl::InvalidArgumentError(absl::StrCat("device '", kind, "' is not cuda or fake"));
}

uint64_t DeviceWeights::ScratchBytes(const Model& model, int64_t max_step_tokens) {
  int64_t max_cols = 0, max_out = 0;
  ProductSizes(model, &max_cols, &max_out);
  auto round = [](uint64_t bytes) { return (bytes + 255) / 256 * 256; };
  return round(max_step_tokens * max_cols * sizeof(float)) +
         round(max_step_tokens * max_out * sizeof(float));
}

std::vector<bool> DeviceWeights::Eligible(const Model& model) {
  std::vector<bool> eligible(model.chunks().size(), true);
  ForEachTensor(model, [&](const TensorRef& t) {
    if (t.rows > 1 && !gpu::DeviceComputes(t.type)) eligible[t.place.chunk] = false;
  });
  for (const LayerTensors& l : model.layers()) {
    bool ok = true;
    for (const TensorRef* t : {&l.gate_exps, &l.up_exps, &l.down_exps}) {
      ok = ok && (!t->present || gpu::DeviceComputes(t->type));
    }
    for (const ExpertRef& e : l.experts) eligible[e.chunk] = eligible[e.chunk] && ok;
    // A fused attn_kv_b's key rows become W_k_b on the CPU (fused_keys.h),
    // from the host copy: its attention stays in host memory.
    if (l.wkv_b.present) eligible[l.wkv_b.place.chunk] = false;
  }
  return eligible;
}

absl::StatusOr<std::unique_ptr<DeviceWeights>> DeviceWeights::Load(
    gpu::Device* device, const Model& model, const storage::RandomAccessFile& file,
    const std::vector<bool>& in_vram, int64_t max_step_tokens) {
  const auto start = std::chrono::steady_clock::now();
  auto w = std::unique_ptr<DeviceWeights>(new DeviceWeights(device));
  const std::vector<memory::ChunkSpec>& specs = model.chunks();
  w->chunks_.resize(specs.size());
  const std::vector<bool> eligible = Eligible(model);
  // The vectors (one-row F32 tensors) the CPU reads, by chunk.
  struct Vector {
    uint64_t offset, bytes;
  };
  std::vector<std::vector<Vector>> vectors(specs.size());
  ForEachTensor(model, [&](const TensorRef& t) {
    if (t.rows == 1 && t.n_mat == 1)
      vectors[t.place.chunk].push_back({t.place.slot_offset, t.row_bytes});
  });
  // gpt-oss: each expert's bias rows, in its chunk.
  for (const LayerTensors& l : model.layers()) {
    if (!l.gate_exps_b.present) continue;
    for (const ExpertRef& e : l.experts) {
      vectors[e.chunk].push_back({e.gate_bias_offset, l.gate_exps_b.row_bytes});
      vectors[e.chunk].push_back({e.up_bias_offset, l.up_exps_b.row_bytes});
      vectors[e.chunk].push_back({e.down_bias_offset, l.down_exps_b.row_bytes});
    }
  }

  // One anonymous mapping holds every shadow: only touched pages cost RAM.
  uint64_t shadow_total = 0;
  for (size_t id = 0; id < specs.size() && id < in_vram.size(); ++id) {
    if (in_vram[id]) shadow_total += (specs[id].slot_bytes + 4095) / 4096 * 4096;
  }
  if (shadow_total > 0) {
    void* map = mmap(nullptr, shadow_total, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot map ", shadow_total, " bytes of address space for VRAM shadows"));
    }
    w->shadow_map_ = static_cast<uint8_t*>(map);
    w->shadow_map_bytes_ = shadow_total;
  }

  void* staging[2] = {nullptr, nullptr};
  gpu::Event copied[2];
  absl::Status status;
  auto cleanup = [&] {
    for (int b = 0; b < 2; ++b) {
      if (staging[b] != nullptr) {
        device->EventSynchronize(copied[b]).IgnoreError();
        device->FreePinned(staging[b]);
      }
      if (copied[b].id >= 0) device->DestroyEvent(copied[b]);
    }
  };
  for (int b = 0; b < 2 && status.ok(); ++b) {
    absl::StatusOr<void*> buffer = device->AllocatePinned(kStagingBytes);
    if (!buffer.ok())
      status = buffer.status();
    else
      staging[b] = *buffer;
    absl::StatusOr<gpu::Event> event = device->CreateEvent();
    if (status.ok() && !event.ok()) status = event.status();
    if (event.ok()) copied[b] = *event;
  }
  uint64_t shadow_offset = 0;
  int turn = 0;
  for (size_t id = 0; id < specs.size() && id < in_vram.size() && status.ok(); ++id) {
    if (!in_vram[id]) continue;
    const memory::ChunkSpec& spec = specs[id];
    if (!eligible[id]) {
      status = absl::InvalidArgumentError(
          absl::StrCat("chunk ", spec.name, " has a matrix of a type the device cannot compute"));
      break;
    }
    Chunk& chunk = w->chunks_[id];
    absl::StatusOr<gpu::DevicePtr> base = device->Allocate(spec.slot_bytes);
    if (!base.ok()) {
      status = base.status();
      break;
    }
    chunk.base = *base;
    chunk.shadow = w->shadow_map_ + shadow_offset;
    shadow_offset += (spec.slot_bytes + 4095) / 4096 * 4096;
    for (const memory::ChunkRead& read : spec.reads) {
      for (uint64_t done = 0; done < read.length && status.ok();) {
        const uint64_t n = std::min(kStagingBytes, read.length - done);
        const int b = turn++ % 2;
        status = device->EventSynchronize(copied[b]);
        if (status.ok())
          status = file.Read(read.file_offset + done, n, static_cast<char*>(staging[b]));
        if (!status.ok()) break;
        // Vectors in this piece go to the shadow as well.
        const uint64_t lo = read.slot_offset + done, hi = lo + n;
        for (const Vector& v : vectors[id]) {
          const uint64_t a = std::max(lo, v.offset), e = std::min(hi, v.offset + v.bytes);
          if (a < e)
            std::memcpy(chunk.shadow + a, static_cast<uint8_t*>(staging[b]) + (a - lo), e - a);
        }
        status = device->CopyToDevice(gpu::Stream::kCopy, chunk.base + lo, staging[b], n);
        if (status.ok()) status = device->Record(copied[b], gpu::Stream::kCopy);
        done += n;
      }
      if (!status.ok()) break;
    }
    ++w->stats_.chunks;
    w->stats_.resident_bytes += spec.slot_bytes;
  }
  if (status.ok()) status = device->StreamSynchronize(gpu::Stream::kCopy);
  cleanup();
  RETURN_IF_ERROR(status);

  // The step's activations.
  w->max_rows_ = max_step_tokens;
  ProductSizes(model, &w->max_cols_, &w->max_out_);
  ASSIGN_OR_RETURN(w->x_, device->Allocate(max_step_tokens * w->max_cols_ * sizeof(float)));
  ASSIGN_OR_RETURN(w->y_, device->Allocate(max_step_tokens * w->max_out_ * sizeof(float)));
  ASSIGN_OR_RETURN(void* x_host,
                   device->AllocatePinned(max_step_tokens * w->max_cols_ * sizeof(float)));
  w->x_host_ = static_cast<float*>(x_host);
  ASSIGN_OR_RETURN(void* y_host,
                   device->AllocatePinned(max_step_tokens * w->max_out_ * sizeof(float)));
  w->y_host_ = static_cast<float*>(y_host);
  w->row_bytes_ = std::max<uint64_t>(model.globals().token_embd.row_bytes, 1);
  ASSIGN_OR_RETURN(void* row_host, device->AllocatePinned(w->row_bytes_));
  w->row_host_ = static_cast<uint8_t*>(row_host);
  w->stats_.load_seconds = Since(start);
  return w;
}

DeviceWeights::~DeviceWeights() {
  for (Chunk& chunk : chunks_) {
    if (chunk.base) device_->Free(chunk.base);
  }
  if (x_) device_->Free(x_);
  if (y_) device_->Free(y_);
  if (x_host_ != nullptr) device_->FreePinned(x_host_);
  if (y_host_ != nullptr) device_->FreePinned(y_host_);
  if (row_host_ != nullptr) device_->FreePinned(row_host_);
  if (shadow_map_ != nullptr) munmap(shadow_map_, shadow_map_bytes_);
}

absl::Status DeviceWeights::MatMul(memory::ChunkId id, uint64_t offset,
                                   const kernels::WeightView& shape, const float* x,
                                   int64_t x_stride, int64_t n, float* y, int64_t y_stride) {
  if (!OnDevice(id) || n < 1 || n > max_rows_ || shape.cols > max_cols_ || shape.rows > max_out_) {
    return absl::InvalidArgumentError(
        absl::StrCat("a device product of ", n, " rows of a ", shape.rows, " x ", shape.cols,
                     " matrix in chunk ", id, " is outside what its buffers were sized for"));
  }
  const auto start = std::chrono::steady_clock::now();
  const int64_t cols = shape.cols, rows = shape.rows;
  // The staging buffers hold the batch's products one after another; one
  // that does not fit behind the others waits for them first. A product
  // with the same input as the one before it (gate and up, q, k and v)
  // shares its staged rows.
  auto staged_equal = [&] {  // (Its bytes, not just its address: x may have changed.)
    const float* staged = x_host_ + pending_.back().x_offset;
    for (int64_t b = 0; b < n; ++b) {
      if (std::memcmp(staged + b * cols, x + b * x_stride, cols * sizeof(float)) != 0) return false;
    }
    return true;
  };
  const bool same_x = !pending_.empty() && pending_.back().x == x &&
                      pending_.back().x_stride == x_stride && pending_.back().n == n &&
                      pending_.back().cols == cols && staged_equal();
  if ((!same_x && x_used_ + n * cols > max_rows_ * max_cols_) ||
      y_used_ + n * rows > max_rows_ * max_out_) {
    RETURN_IF_ERROR(Flush());
  }
  Pending p{y, y_stride, n, rows, y_used_};
  p.x = x;
  p.x_stride = x_stride;
  p.cols = cols;
  p.x_offset = same_x && !pending_.empty() ? pending_.back().x_offset : x_used_;
  p.matrix = {shape.type, rows, cols, chunks_[id].base + offset, shape.row_stride_bytes};
  if (p.x_offset == x_used_) {
    float* x_stage = x_host_ + x_used_;
    for (int64_t b = 0; b < n; ++b) {
      std::memcpy(x_stage + b * cols, x + b * x_stride, cols * sizeof(float));
    }
    x_used_ += n * cols;
    stats_.activation_bytes += static_cast<int64_t>(n * cols * sizeof(float));
  }
  pending_.push_back(p);
  y_used_ += n * rows;
  ++stats_.products;
  stats_.product_bytes += rows * shape.row_stride_bytes;
  stats_.activation_bytes += static_cast<int64_t>(n * rows * sizeof(float));
  absl::Status status = batch_depth_ > 0 ? absl::OkStatus() : Flush();
  stats_.product_seconds += Since(start);
  return status;
}

absl::Status DeviceWeights::Flush() {
  if (pending_.empty()) return absl::OkStatus();
  // One copy of every staged input, the kernels, one copy of every output.
  absl::Status status = device_->CopyToDevice(gpu::Stream::kCompute, x_, x_host_,
                                              static_cast<uint64_t>(x_used_) * sizeof(float));
  for (const Pending& p : pending_) {
    if (!status.ok()) break;
    status = device_->MatMul(gpu::Stream::kCompute, p.matrix, x_ + p.x_offset * sizeof(float),
                             p.cols, p.n, y_ + p.y_offset * sizeof(float), p.rows);
  }
  if (status.ok()) {
    status = device_->CopyToHost(gpu::Stream::kCompute, y_host_, y_,
                                 static_cast<uint64_t>(y_used_) * sizeof(float));
  }
  const absl::Status synced = device_->StreamSynchronize(gpu::Stream::kCompute);
  if (status.ok()) status = synced;
  ++stats_.synchronizations;
  if (status.ok()) {
    for (const Pending& p : pending_) {
      for (int64_t b = 0; b < p.n; ++b) {
        std::memcpy(p.y + b * p.y_stride, y_host_ + p.y_offset + b * p.rows,
                    p.rows * sizeof(float));
      }
    }
  }
  pending_.clear();
  x_used_ = y_used_ = 0;
  return status;
}

void DeviceWeights::BeginBatch() { ++batch_depth_; }

absl::Status DeviceWeights::EndBatch() {
  if (batch_depth_ > 0 && --batch_depth_ > 0) return absl::OkStatus();
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = Flush();
  stats_.product_seconds += Since(start);
  return status;
}

absl::StatusOr<const uint8_t*> DeviceWeights::ReadRow(memory::ChunkId id, uint64_t offset,
                                                      uint64_t bytes) {
  if (!OnDevice(id) || bytes > row_bytes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", bytes, " bytes of chunk ", id, " from the device"));
  }
  RETURN_IF_ERROR(
      device_->CopyToHost(gpu::Stream::kCompute, row_host_, chunks_[id].base + offset, bytes));
  RETURN_IF_ERROR(device_->StreamSynchronize(gpu::Stream::kCompute));
  ++stats_.row_reads;
  return row_host_;
}

}  // namespace waste::model
