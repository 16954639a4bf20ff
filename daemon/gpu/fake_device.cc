#include "daemon/gpu/fake_device.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "daemon/kernels/matvec.h"

namespace waste::gpu {
namespace {

constexpr uint64_t kAlign = 256;  // As cudaMalloc's.

uint64_t RoundUp(uint64_t bytes) {
  return (std::max<uint64_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
}

bool InBlocks(const std::map<uint64_t, uint64_t>& blocks, uint64_t addr, uint64_t bytes) {
  auto it = blocks.upper_bound(addr);
  if (it == blocks.begin()) return false;
  --it;
  return addr >= it->first && addr + bytes <= it->first + it->second;
}

}  // namespace

FakeDevice::FakeDevice(const FakeDeviceOptions& options) : options_(options) {
  for (int s = 0; s < kStreamCount; ++s) workers_[s] = std::thread([this, s] { Run(s); });
}

FakeDevice::~FakeDevice() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& worker : workers_) worker.join();
  for (const auto& [addr, bytes] : device_blocks_) std::free(reinterpret_cast<void*>(addr));
  for (const auto& [addr, bytes] : pinned_blocks_) std::free(reinterpret_cast<void*>(addr));
}

void FakeDevice::Run(int s) {
  StreamState& stream = streams_[s];
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !stream.queue.empty(); });
    if (stream.queue.empty()) return;  // Stopped and drained.
    std::function<void()> work = std::move(stream.queue.front());
    stream.queue.pop_front();
    stream.busy = true;
    lock.unlock();
    work();
    lock.lock();
    stream.busy = false;
    cv_.notify_all();
  }
}

void FakeDevice::WaitIdle(int s) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return streams_[s].queue.empty() && !streams_[s].busy; });
}

void FakeDevice::Issue(Stream stream, const char* kind, uint64_t bytes, double seconds,
                       std::function<void()> work) {
  std::lock_guard<std::mutex> lock(mu_);
  StreamState& s = streams_[static_cast<int>(stream)];
  const double start = std::max(s.clock, host_clock_);
  s.clock = start + seconds;
  timeline_.push_back({stream, kind, std::move(s.label), start, s.clock, bytes});
  s.label.clear();
  s.queue.push_back(std::move(work));
  cv_.notify_all();
}

bool FakeDevice::InDevice(uint64_t addr, uint64_t bytes) const {
  return InBlocks(device_blocks_, addr, bytes);
}

bool FakeDevice::InPinned(const void* ptr, uint64_t bytes) const {
  return InBlocks(pinned_blocks_, reinterpret_cast<uint64_t>(ptr), bytes);
}

absl::StatusOr<DevicePtr> FakeDevice::Allocate(uint64_t bytes) {
  const uint64_t size = RoundUp(bytes);
  if (static_cast<uint64_t>(stats_.allocated_bytes) + size > options_.memory_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("fake device: ", size, " bytes more would exceed its ", options_.memory_bytes,
                     " bytes of memory (", stats_.allocated_bytes, " allocated)"));
  }
  void* p = std::aligned_alloc(kAlign, size);
  if (p == nullptr) return absl::ResourceExhaustedError("fake device: host allocation failed");
  std::memset(p, 0xcd, size);  // Garbage, as fresh device memory is.
  device_blocks_[reinterpret_cast<uint64_t>(p)] = size;
  stats_.allocated_bytes += static_cast<int64_t>(size);
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return DevicePtr{reinterpret_cast<uint64_t>(p)};
}

void FakeDevice::Free(DevicePtr ptr) {
  auto it = device_blocks_.find(ptr.addr);
  WCHECK(it != device_blocks_.end()) << "fake device: Free of an address it did not allocate";
  // As cudaFree: the device finishes what may still use the memory.
  for (int s = 0; s < kStreamCount; ++s) WaitIdle(s);
  stats_.allocated_bytes -= static_cast<int64_t>(it->second);
  std::free(reinterpret_cast<void*>(it->first));
  device_blocks_.erase(it);
}

absl::StatusOr<void*> FakeDevice::AllocatePinned(uint64_t bytes) {
  void* p = std::aligned_alloc(kAlign, RoundUp(bytes));
  if (p == nullptr) return absl::ResourceExhaustedError("fake device: pinned allocation failed");
  pinned_blocks_[reinterpret_cast<uint64_t>(p)] = RoundUp(bytes);
  return p;
}

void FakeDevice::FreePinned(void* ptr) {
  auto it = pinned_blocks_.find(reinterpret_cast<uint64_t>(ptr));
  WCHECK(it != pinned_blocks_.end()) << "fake device: FreePinned of memory it did not allocate";
  for (int s = 0; s < kStreamCount; ++s) WaitIdle(s);
  std::free(ptr);
  pinned_blocks_.erase(it);
}

absl::Status FakeDevice::CopyToDevice(Stream stream, DevicePtr dst, const void* src,
                                      uint64_t bytes) {
  if (!InDevice(dst.addr, bytes)) {
    return absl::InvalidArgumentError("fake device: copy destination is not device memory");
  }
  if (!InPinned(src, bytes)) {
    return absl::InvalidArgumentError(
        "fake device: copy source is not pinned memory (stage it through AllocatePinned)");
  }
  ++stats_.h2d_copies;
  stats_.h2d_bytes += static_cast<int64_t>(bytes);
  const double delay = options_.real_copy_delay_seconds;
  Issue(stream, "h2d", bytes,
        options_.copy_latency_seconds + static_cast<double>(bytes) / options_.h2d_bytes_per_second,
        [dst, src, bytes, delay] {
          if (delay > 0) std::this_thread::sleep_for(std::chrono::duration<double>(delay));
          std::memcpy(reinterpret_cast<void*>(dst.addr), src, bytes);
        });
  return absl::OkStatus();
}

absl::Status FakeDevice::CopyToHost(Stream stream, void* dst, DevicePtr src, uint64_t bytes) {
  if (!InDevice(src.addr, bytes)) {
    return absl::InvalidArgumentError("fake device: copy source is not device memory");
  }
  stats_.d2h_bytes += static_cast<int64_t>(bytes);
  Issue(stream, "d2h", bytes,
        options_.copy_latency_seconds + static_cast<double>(bytes) / options_.d2h_bytes_per_second,
        [dst, src, bytes] { std::memcpy(dst, reinterpret_cast<const void*>(src.addr), bytes); });
  return absl::OkStatus();
}

absl::StatusOr<Event> FakeDevice::CreateEvent() {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(EventState{});
  events_.back().live = true;
  return Event{static_cast<int32_t>(events_.size() - 1)};
}

void FakeDevice::DestroyEvent(Event event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (event.id >= 0 && event.id < static_cast<int32_t>(events_.size())) {
    events_[event.id].live = false;  // Ids are not reused.
  }
}

absl::Status FakeDevice::Record(Event event, Stream stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (event.id < 0 || event.id >= static_cast<int32_t>(events_.size()) || !events_[event.id].live) {
    return absl::InvalidArgumentError("fake device: no such event");
  }
  EventState& e = events_[event.id];
  StreamState& s = streams_[static_cast<int>(stream)];
  const int64_t generation = ++e.recorded;
  e.time = std::max(s.clock, host_clock_);
  const int32_t id = event.id;
  s.queue.push_back([this, id, generation] {
    std::lock_guard<std::mutex> inner(mu_);
    events_[id].done = std::max(events_[id].done, generation);
  });
  cv_.notify_all();
  return absl::OkStatus();
}

absl::Status FakeDevice::StreamWait(Stream stream, Event event) {
  int64_t generation;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (event.id < 0 || event.id >= static_cast<int32_t>(events_.size()) ||
        !events_[event.id].live) {
      return absl::InvalidArgumentError("fake device: no such event");
    }
    const EventState& e = events_[event.id];
    generation = e.recorded;
    if (generation == 0) return absl::OkStatus();  // Never recorded: complete.
    StreamState& s = streams_[static_cast<int>(stream)];
    const double ready = std::max(s.clock, host_clock_);
    if (e.time > ready) {
      stats_.stream_wait_seconds[static_cast<int>(stream)] += e.time - ready;
      timeline_.push_back({stream, "wait", s.label, ready, e.time, 0});
      s.clock = e.time;
    }
    const int32_t id = event.id;
    s.queue.push_back([this, id, generation] {
      std::unique_lock<std::mutex> inner(mu_);
      cv_.wait(inner, [&] { return events_[id].done >= generation; });
    });
  }
  cv_.notify_all();
  return absl::OkStatus();
}

absl::Status FakeDevice::EventSynchronize(Event event) {
  std::unique_lock<std::mutex> lock(mu_);
  if (event.id < 0 || event.id >= static_cast<int32_t>(events_.size()) || !events_[event.id].live) {
    return absl::InvalidArgumentError("fake device: no such event");
  }
  const int64_t generation = events_[event.id].recorded;
  host_clock_ = std::max(host_clock_, events_[event.id].time);
  const int32_t id = event.id;
  cv_.wait(lock, [&] { return events_[id].done >= generation; });
  return absl::OkStatus();
}

absl::Status FakeDevice::StreamSynchronize(Stream stream) {
  const int s = static_cast<int>(stream);
  {
    std::lock_guard<std::mutex> lock(mu_);
    host_clock_ = std::max(host_clock_, streams_[s].clock);
  }
  WaitIdle(s);
  return absl::OkStatus();
}

absl::Status FakeDevice::MatMul(Stream stream, const DeviceMatrix& w, DevicePtr x, int64_t x_stride,
                                int64_t batch, DevicePtr y, int64_t y_stride) {
  if (absl::Status status = CheckMatMul(w, x_stride, batch, y_stride); !status.ok()) {
    return status;
  }
  const uint64_t weight_bytes = static_cast<uint64_t>(w.rows) * w.row_stride_bytes;
  const uint64_t x_bytes = ((batch - 1) * x_stride + w.cols) * sizeof(float);
  const uint64_t y_bytes = ((batch - 1) * y_stride + w.rows) * sizeof(float);
  if (!InDevice(w.data.addr, weight_bytes) || !InDevice(x.addr, x_bytes) ||
      !InDevice(y.addr, y_bytes)) {
    return absl::InvalidArgumentError("fake device: a product's operand is not device memory");
  }
  ++stats_.matmuls;
  stats_.matmul_weight_bytes += static_cast<int64_t>(weight_bytes);
  kernels::WeightView view{w.type, w.rows, w.cols, reinterpret_cast<const void*>(w.data.addr),
                           w.row_stride_bytes};
  Issue(stream, "matmul", weight_bytes,
        options_.matmul_latency_seconds +
            static_cast<double>(weight_bytes) / options_.memory_bytes_per_second,
        [view, x, x_stride, batch, y, y_stride] {
          kernels::Scratch scratch(kernels::MatVecScratchBytes(view.type, view.cols, batch));
          absl::Status status =
              kernels::MatMul(view, reinterpret_cast<const float*>(x.addr), x_stride, batch,
                              reinterpret_cast<float*>(y.addr), y_stride, nullptr, &scratch);
          WCHECK(status.ok()) << "fake device: " << status;
        });
  return absl::OkStatus();
}

void FakeDevice::Label(Stream stream, std::string_view label) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_[static_cast<int>(stream)].label = std::string(label);
}

DeviceStats FakeDevice::Stats() { return stats_; }

std::vector<TimelineEntry> FakeDevice::Timeline() const {
  std::lock_guard<std::mutex> lock(mu_);
  return timeline_;
}

}  // namespace waste::gpu
