// FakeDevice: a Device that runs on the CPU, for tests of what is placed on
// a GPU and how copies are scheduled. Device memory is host memory (capped
// at FakeDeviceOptions::memory_bytes); each stream is a worker thread that
// runs its operations in order (copies as memcpy, products with the CPU
// kernels of daemon/kernels), so a missing wait shows up as wrong data, not
// only as a wrong picture.
//
// Besides running the work, it keeps a simulated timeline: every operation
// gets a start and end in simulated seconds, computed when it is issued
// from the stream's clock, the events it waits for, and a cost model (copy
// latency + bytes / PCIe bandwidth; product latency + weight bytes / device
// memory bandwidth). The host's clock advances only when it synchronizes.
// The timeline is deterministic whatever the machine's load, so tests can
// assert overlap (copy of layer l+1 during compute of layer l), order and
// waits exactly.
//
// Thread-safety: as Device (one driving thread); Timeline() and Stats() may
// be called from that thread at any time.
#ifndef WASTE_DAEMON_GPU_FAKE_DEVICE_H_
#define WASTE_DAEMON_GPU_FAKE_DEVICE_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "daemon/gpu/device.h"

namespace waste::gpu {

struct FakeDeviceOptions {
  uint64_t memory_bytes = uint64_t{1} << 30;
  // Cost model of the simulated timeline.
  double copy_latency_seconds = 10e-6;
  double h2d_bytes_per_second = 25e9;  // PCIe 4.0 x16, about.
  double d2h_bytes_per_second = 25e9;
  double matmul_latency_seconds = 5e-6;
  double memory_bytes_per_second = 1e12;  // Device memory read by products.
  // Real time each host-to-device copy sleeps before it copies, to widen
  // the window in which a missing wait corrupts data (tests of hazards).
  double real_copy_delay_seconds = 0;
};

// One operation on the simulated timeline.
struct TimelineEntry {
  Stream stream = Stream::kCompute;
  std::string kind;   // "h2d", "d2h", "matmul", "wait".
  std::string label;  // From Device::Label, or empty.
  double start = 0;   // Simulated seconds.
  double end = 0;
  uint64_t bytes = 0;  // Copied, or weight bytes read.
};

class FakeDevice : public Device {
 public:
  explicit FakeDevice(const FakeDeviceOptions& options = {});
  ~FakeDevice() override;

  std::string name() const override { return "fake"; }
  uint64_t memory_bytes() const override { return options_.memory_bytes; }

  absl::StatusOr<DevicePtr> Allocate(uint64_t bytes) override;
  void Free(DevicePtr ptr) override;
  absl::StatusOr<void*> AllocatePinned(uint64_t bytes) override;
  void FreePinned(void* ptr) override;

  absl::Status CopyToDevice(Stream stream, DevicePtr dst, const void* src, uint64_t bytes) override;
  absl::Status CopyToHost(Stream stream, void* dst, DevicePtr src, uint64_t bytes) override;

  absl::StatusOr<Event> CreateEvent() override;
  void DestroyEvent(Event event) override;
  absl::Status Record(Event event, Stream stream) override;
  absl::Status StreamWait(Stream stream, Event event) override;
  absl::Status EventSynchronize(Event event) override;
  absl::Status StreamSynchronize(Stream stream) override;

  absl::Status MatMul(Stream stream, const DeviceMatrix& w, DevicePtr x, int64_t x_stride,
                      int64_t batch, DevicePtr y, int64_t y_stride) override;

  void Label(Stream stream, std::string_view label) override;
  DeviceStats Stats() override;

  // The simulated timeline so far, in issue order.
  std::vector<TimelineEntry> Timeline() const;
  // The host's simulated clock (advanced by synchronization).
  double host_seconds() const { return host_clock_; }
  // Host memory behind a device address (tests read device memory).
  const uint8_t* HostView(DevicePtr ptr) const {
    return reinterpret_cast<const uint8_t*>(ptr.addr);
  }

 private:
  struct EventState {
    bool live = false;
    int64_t recorded = 0;  // Records issued.
    int64_t done = 0;      // Records the stream has reached.
    double time = 0;       // Simulated completion of the latest record.
  };
  struct StreamState {
    std::deque<std::function<void()>> queue;
    bool busy = false;
    double clock = 0;  // Simulated time its issued work ends.
    std::string label;
  };

  // Issues `work` on `stream` with simulated duration `seconds`.
  void Issue(Stream stream, const char* kind, uint64_t bytes, double seconds,
             std::function<void()> work);
  void Run(int stream);
  bool InDevice(uint64_t addr, uint64_t bytes) const;
  bool InPinned(const void* ptr, uint64_t bytes) const;
  void WaitIdle(int stream);

  const FakeDeviceOptions options_;
  // Issue-side state (the driving thread only).
  std::map<uint64_t, uint64_t> device_blocks_;  // addr -> bytes.
  std::map<uint64_t, uint64_t> pinned_blocks_;
  double host_clock_ = 0;
  DeviceStats stats_;

  // Shared with the workers.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<EventState> events_;
  StreamState streams_[kStreamCount];
  std::vector<TimelineEntry> timeline_;
  bool stop_ = false;
  std::thread workers_[kStreamCount];
};

}  // namespace waste::gpu

#endif  // WASTE_DAEMON_GPU_FAKE_DEVICE_H_
