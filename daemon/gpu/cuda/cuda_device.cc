#include "daemon/gpu/cuda/cuda_device.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "daemon/gpu/cuda/cuda_api.h"
#include "daemon/kernels/iq_grids.h"

namespace waste::gpu {
namespace {

namespace api = cuda_api;

std::string ErrorText(int code) {
  return absl::StrCat(api::ErrorName(code), " (", api::ErrorString(code), ")");
}

absl::Status CudaStatus(int code, const char* what) {
  if (code == api::kSuccess) return absl::OkStatus();
  const std::string message = absl::StrCat(what, ": ", ErrorText(code));
  if (code == api::kErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  if (code == api::kErrorInsufficientDriver || code == api::kErrorNoDevice) {
    return absl::UnavailableError(message);
  }
  return absl::InternalError(message);
}

bool InBlocks(const std::map<uint64_t, uint64_t>& blocks, uint64_t addr, uint64_t bytes) {
  auto it = blocks.upper_bound(addr);
  if (it == blocks.begin()) return false;
  --it;
  return addr >= it->first && addr + bytes <= it->first + it->second;
}

class CudaDevice : public Device {
 public:
  CudaDevice(int ordinal, std::string name, uint64_t memory_bytes)
      : ordinal_(ordinal), name_(std::move(name)), memory_bytes_(memory_bytes) {}

  ~CudaDevice() override {
    for (api::Handle stream : streams_) {
      if (stream != nullptr) api::StreamSynchronize(stream);
    }
    for (api::Handle event : events_) {
      if (event != nullptr) api::EventDestroy(event);
    }
    for (const WaitTiming& t : pending_waits_)
      api::EventDestroy(t.before), api::EventDestroy(t.after);
    for (const WaitTiming& t : spare_waits_)
      api::EventDestroy(t.before), api::EventDestroy(t.after);
    for (const auto& [addr, bytes] : allocations_) api::Free(addr);
    for (const auto& [addr, bytes] : pinned_) api::HostFree(reinterpret_cast<void*>(addr));
    for (api::Handle stream : streams_) {
      if (stream != nullptr) api::StreamDestroy(stream);
    }
  }

  absl::Status Init() {
    for (api::Handle& stream : streams_) {
      absl::Status status = CudaStatus(api::StreamCreate(&stream), "cudaStreamCreate");
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  }

  std::string name() const override { return absl::StrCat("cuda:", ordinal_, " ", name_); }
  uint64_t memory_bytes() const override { return memory_bytes_; }

  absl::StatusOr<DevicePtr> Allocate(uint64_t bytes) override {
    uint64_t addr = 0;
    absl::Status status = CudaStatus(api::Malloc(&addr, std::max<uint64_t>(bytes, 1)),
                                     absl::StrCat("cudaMalloc of ", bytes, " bytes").c_str());
    if (!status.ok()) return status;
    allocations_[addr] = bytes;
    stats_.allocated_bytes += static_cast<int64_t>(bytes);
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
    return DevicePtr{addr};
  }

  void Free(DevicePtr ptr) override {
    auto it = allocations_.find(ptr.addr);
    WCHECK(it != allocations_.end()) << "cuda: Free of an address it did not allocate";
    const int code = api::Free(ptr.addr);  // Synchronizes the device.
    if (code != api::kSuccess) WLOG(WARNING) << "cudaFree: " << ErrorText(code);
    stats_.allocated_bytes -= static_cast<int64_t>(it->second);
    allocations_.erase(it);
  }

  absl::StatusOr<void*> AllocatePinned(uint64_t bytes) override {
    void* ptr = nullptr;
    absl::Status status = CudaStatus(api::HostAlloc(&ptr, std::max<uint64_t>(bytes, 1)),
                                     absl::StrCat("cudaHostAlloc of ", bytes, " bytes").c_str());
    if (!status.ok()) return status;
    pinned_[reinterpret_cast<uint64_t>(ptr)] = bytes;
    return ptr;
  }

  void FreePinned(void* ptr) override {
    auto it = pinned_.find(reinterpret_cast<uint64_t>(ptr));
    WCHECK(it != pinned_.end()) << "cuda: FreePinned of memory it did not allocate";
    const int code = api::HostFree(ptr);
    if (code != api::kSuccess) WLOG(WARNING) << "cudaFreeHost: " << ErrorText(code);
    pinned_.erase(it);
  }

  absl::Status CopyToDevice(Stream stream, DevicePtr dst, const void* src,
                            uint64_t bytes) override {
    if (!InBlocks(allocations_, dst.addr, bytes)) {
      return absl::InvalidArgumentError("cuda: copy destination is not device memory");
    }
    if (!InBlocks(pinned_, reinterpret_cast<uint64_t>(src), bytes)) {
      return absl::InvalidArgumentError(
          "cuda: copy source is not pinned memory (stage it through AllocatePinned)");
    }
    ++stats_.h2d_copies;
    stats_.h2d_bytes += static_cast<int64_t>(bytes);
    return CudaStatus(api::CopyToDeviceAsync(dst.addr, src, bytes, S(stream)), "cudaMemcpyAsync");
  }

  absl::Status CopyToHost(Stream stream, void* dst, DevicePtr src, uint64_t bytes) override {
    if (!InBlocks(allocations_, src.addr, bytes)) {
      return absl::InvalidArgumentError("cuda: copy source is not device memory");
    }
    stats_.d2h_bytes += static_cast<int64_t>(bytes);
    return CudaStatus(api::CopyToHostAsync(dst, src.addr, bytes, S(stream)), "cudaMemcpyAsync");
  }

  absl::StatusOr<Event> CreateEvent() override {
    api::Handle event = nullptr;
    absl::Status status = CudaStatus(api::EventCreate(&event, false), "cudaEventCreate");
    if (!status.ok()) return status;
    if (!free_events_.empty()) {
      const int32_t id = free_events_.back();
      free_events_.pop_back();
      events_[id] = event;
      return Event{id};
    }
    events_.push_back(event);
    return Event{static_cast<int32_t>(events_.size() - 1)};
  }

  void DestroyEvent(Event event) override {
    if (event.id < 0 || event.id >= static_cast<int32_t>(events_.size())) return;
    if (events_[event.id] == nullptr) return;
    api::EventDestroy(events_[event.id]);
    events_[event.id] = nullptr;
    free_events_.push_back(event.id);
  }

  absl::Status Record(Event event, Stream stream) override {
    api::Handle e = Lookup(event);
    if (e == nullptr) return absl::InvalidArgumentError("cuda: no such event");
    return CudaStatus(api::EventRecord(e, S(stream)), "cudaEventRecord");
  }

  absl::Status StreamWait(Stream stream, Event event) override {
    api::Handle e = Lookup(event);
    if (e == nullptr) return absl::InvalidArgumentError("cuda: no such event");
    // before/after timing events around the wait measure the stall.
    WaitTiming timing;
    if (!spare_waits_.empty()) {
      timing = spare_waits_.back();
      spare_waits_.pop_back();
    } else {
      absl::Status status = CudaStatus(api::EventCreate(&timing.before, true), "cudaEventCreate");
      if (status.ok())
        status = CudaStatus(api::EventCreate(&timing.after, true), "cudaEventCreate");
      if (!status.ok()) return status;
    }
    timing.stream = static_cast<int>(stream);
    absl::Status status = CudaStatus(api::EventRecord(timing.before, S(stream)), "cudaEventRecord");
    if (status.ok()) status = CudaStatus(api::StreamWaitEvent(S(stream), e), "cudaStreamWaitEvent");
    if (status.ok())
      status = CudaStatus(api::EventRecord(timing.after, S(stream)), "cudaEventRecord");
    if (!status.ok()) {
      spare_waits_.push_back(timing);
      return status;
    }
    pending_waits_.push_back(timing);
    if (pending_waits_.size() > 256) HarvestWaits(/*block=*/false);
    return absl::OkStatus();
  }

  absl::Status EventSynchronize(Event event) override {
    api::Handle e = Lookup(event);
    if (e == nullptr) return absl::InvalidArgumentError("cuda: no such event");
    return CudaStatus(api::EventSynchronize(e), "cudaEventSynchronize");
  }

  absl::Status StreamSynchronize(Stream stream) override {
    return CudaStatus(api::StreamSynchronize(S(stream)), "cudaStreamSynchronize");
  }

  absl::Status MatMul(Stream stream, const DeviceMatrix& w, DevicePtr x, int64_t x_stride,
                      int64_t batch, DevicePtr y, int64_t y_stride) override {
    if (absl::Status status = CheckMatMul(w, x_stride, batch, y_stride); !status.ok()) {
      return status;
    }
    ++stats_.matmuls;
    stats_.matmul_weight_bytes += w.rows * w.row_stride_bytes;
    return CudaStatus(
        api::LaunchMatMul(static_cast<uint32_t>(w.type), w.rows, w.cols, w.data.addr,
                          w.row_stride_bytes, x.addr, x_stride, batch, y.addr, y_stride, S(stream)),
        "matmul kernel launch");
  }

  DeviceStats Stats() override {
    HarvestWaits(/*block=*/true);
    return stats_;
  }

 private:
  struct WaitTiming {
    api::Handle before = nullptr;
    api::Handle after = nullptr;
    int stream = 0;
  };

  api::Handle S(Stream stream) const { return streams_[static_cast<int>(stream)]; }

  api::Handle Lookup(Event event) const {
    if (event.id < 0 || event.id >= static_cast<int32_t>(events_.size())) return nullptr;
    return events_[event.id];
  }

  // Adds the stalls of completed waits (all of them, waiting, when `block`).
  void HarvestWaits(bool block) {
    std::vector<WaitTiming> still;
    for (const WaitTiming& t : pending_waits_) {
      const int state = block ? api::EventSynchronize(t.after) : api::EventQuery(t.after);
      if (state == api::kErrorNotReady) {
        still.push_back(t);
        continue;
      }
      float ms = 0;
      if (state == api::kSuccess && api::EventElapsedMs(t.before, t.after, &ms) == api::kSuccess) {
        stats_.stream_wait_seconds[t.stream] += ms / 1e3;
      }
      spare_waits_.push_back(t);
    }
    pending_waits_ = std::move(still);
  }

  const int ordinal_;
  const std::string name_;
  const uint64_t memory_bytes_;
  api::Handle streams_[kStreamCount] = {nullptr, nullptr};
  std::vector<api::Handle> events_;
  std::vector<int32_t> free_events_;
  std::vector<WaitTiming> pending_waits_, spare_waits_;
  std::map<uint64_t, uint64_t> allocations_;
  std::map<uint64_t, uint64_t> pinned_;
  DeviceStats stats_;
};

}  // namespace

bool CudaCompiledIn() { return true; }

absl::StatusOr<std::unique_ptr<Device>> OpenCudaDevice(int ordinal) {
  int count = 0;
  const int code = api::GetDeviceCount(&count);
  if (code != api::kSuccess) {
    return absl::UnavailableError(
        absl::StrCat("no CUDA device: cudaGetDeviceCount: ", ErrorText(code)));
  }
  if (count == 0) return absl::UnavailableError("no CUDA device: the driver sees none");
  if (ordinal < 0 || ordinal >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA device ", ordinal, " does not exist (", count, " present)"));
  }
  if (absl::Status s = CudaStatus(api::SetDevice(ordinal), "cudaSetDevice"); !s.ok()) return s;
  char name[256];
  int major = 0, minor = 0;
  if (absl::Status s =
          CudaStatus(api::DeviceProperties(ordinal, name, sizeof(name), &major, &minor),
                     "cudaGetDeviceProperties");
      !s.ok()) {
    return s;
  }
  if (major < 8) {
    return absl::UnavailableError(absl::StrCat("no usable CUDA device: ", name,
                                               " has compute capability ", major, ".", minor,
                                               "; the kernels are built for 8.0 and later"));
  }
  uint64_t free_bytes = 0, total_bytes = 0;
  if (absl::Status s = CudaStatus(api::MemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
      !s.ok()) {
    return s;
  }
  // The codebook types' grids, for their kernels.
  auto tables = std::make_unique<api::IqTables>();
  std::copy_n(kernels::kIq2XxsGrid, 256, tables->iq2xxs);
  std::copy_n(kernels::kIq2XsGrid, 512, tables->iq2xs);
  std::copy_n(kernels::kIq2SGrid, 1024, tables->iq2s);
  std::copy_n(kernels::kIq1SGrid, 2048, tables->iq1s);
  std::copy_n(kernels::kIqSignBytes.begin(), 256, tables->sign_bytes);
  std::copy_n(kernels::kIq3XxsGrid, 256, tables->iq3xxs);
  std::copy_n(kernels::kIq3SGrid, 512, tables->iq3s);
  std::copy_n(kernels::kIqSigns7.begin(), 128, tables->signs7);
  if (absl::Status s = CudaStatus(api::SetIqTables(*tables), "cudaMemcpyToSymbol"); !s.ok()) {
    return s;
  }
  auto device = std::make_unique<CudaDevice>(
      ordinal, absl::StrCat(name, " (sm_", major, minor, ")"), free_bytes);
  if (absl::Status s = device->Init(); !s.ok()) return s;
  return std::unique_ptr<Device>(std::move(device));
}

}  // namespace waste::gpu
