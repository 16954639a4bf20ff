// A compute device with its own memory (a GPU): the seam between model/ and
// a backend. Device memory, pinned host buffers to stage copies through,
// asynchronous host-to-device copies on a copy stream, events to order the
// streams, and products of quantized weight matrices resident on the device
// with f32 activations, on a compute stream.
//
// Implementations: FakeDevice (fake_device.h; host memory, CPU kernels and
// a simulated timeline, for tests of placement and copy scheduling) and
// CudaDevice (cuda/cuda_device.h, built with --config=cuda).
//
// Semantics follow CUDA's: operations on one stream run in issue order;
// operations on different streams may overlap; Record(e, s) marks the work
// issued on s so far, StreamWait(s, e) makes later work on s wait for the
// latest Record of e (a never-recorded event is complete), and the host
// waits with EventSynchronize / StreamSynchronize. A copy's source (host to
// device) must be pinned memory from AllocatePinned and must not change
// until the copy is known complete.
//
// Thread-safety: one host thread drives a Device (the engine thread).
#ifndef WASTE_DAEMON_GPU_DEVICE_H_
#define WASTE_DAEMON_GPU_DEVICE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/kernels/quant_blocks.h"

namespace waste::gpu {

// An address in device memory. 0 is null.
struct DevicePtr {
  uint64_t addr = 0;
  DevicePtr operator+(uint64_t offset) const { return {addr + offset}; }
  bool operator==(const DevicePtr&) const = default;
  explicit operator bool() const { return addr != 0; }
};

enum class Stream : int { kCompute = 0, kCopy = 1 };
inline constexpr int kStreamCount = 2;
const char* StreamName(Stream stream);

// An event handle from Device::CreateEvent.
struct Event {
  int32_t id = -1;
};

// A weight matrix resident on the device: `rows` rows of `cols` elements of
// `type`, row r at data + r * row_stride_bytes (as kernels::WeightView).
struct DeviceMatrix {
  kernels::WeightType type = kernels::WeightType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  DevicePtr data;
  int64_t row_stride_bytes = 0;
};

// The weight types every device's kernels take (CudaDevice has kernels for
// exactly these; FakeDevice refuses the others too, so plans made in tests
// are the plans a GPU gets).
bool DeviceComputes(kernels::WeightType type);

// Counters, monotonic since the device was created.
struct DeviceStats {
  int64_t h2d_copies = 0;
  int64_t h2d_bytes = 0;
  int64_t d2h_bytes = 0;
  int64_t matmuls = 0;
  int64_t matmul_weight_bytes = 0;  // Weight bytes the products read.
  // Time each stream stood waiting on events of the other (copy wait: the
  // compute stream waiting for weights to arrive).
  double stream_wait_seconds[kStreamCount] = {0, 0};
  int64_t allocated_bytes = 0;  // Gauge: device memory held now.
  int64_t peak_allocated_bytes = 0;
};

class Device {
 public:
  virtual ~Device() = default;

  virtual std::string name() const = 0;
  // Device memory this process could use when the device was opened.
  virtual uint64_t memory_bytes() const = 0;

  virtual absl::StatusOr<DevicePtr> Allocate(uint64_t bytes) = 0;
  virtual void Free(DevicePtr ptr) = 0;
  // Page-locked host memory (DMA-able): staging for copies.
  virtual absl::StatusOr<void*> AllocatePinned(uint64_t bytes) = 0;
  virtual void FreePinned(void* ptr) = 0;

  // Asynchronous on `stream`. `src` must lie in one AllocatePinned buffer.
  virtual absl::Status CopyToDevice(Stream stream, DevicePtr dst, const void* src,
                                    uint64_t bytes) = 0;
  // Asynchronous on `stream`; `dst` is valid once the stream (or an event
  // recorded after it) is synchronized.
  virtual absl::Status CopyToHost(Stream stream, void* dst, DevicePtr src, uint64_t bytes) = 0;

  virtual absl::StatusOr<Event> CreateEvent() = 0;
  virtual void DestroyEvent(Event event) = 0;
  virtual absl::Status Record(Event event, Stream stream) = 0;
  virtual absl::Status StreamWait(Stream stream, Event event) = 0;
  virtual absl::Status EventSynchronize(Event event) = 0;
  virtual absl::Status StreamSynchronize(Stream stream) = 0;

  // y[b * y_stride + r] = dot(row r of w, x + b * x_stride) for b < batch
  // (<= kernels::kMaxBatch), on `stream`. x and y are f32 device buffers.
  // A type !DeviceComputes, a cols that is not whole blocks or a short
  // stride is INVALID_ARGUMENT and nothing is issued.
  virtual absl::Status MatMul(Stream stream, const DeviceMatrix& w, DevicePtr x, int64_t x_stride,
                              int64_t batch, DevicePtr y, int64_t y_stride) = 0;

  // Names the next operation issued on `stream` (FakeDevice's timeline);
  // a hint, free to ignore.
  virtual void Label(Stream stream, std::string_view label) {
    (void)stream;
    (void)label;
  }

  virtual DeviceStats Stats() = 0;
};

// Checks a product's shapes as every device must (shared by the backends).
absl::Status CheckMatMul(const DeviceMatrix& w, int64_t x_stride, int64_t batch, int64_t y_stride);

}  // namespace waste::gpu

#endif  // WASTE_DAEMON_GPU_DEVICE_H_
