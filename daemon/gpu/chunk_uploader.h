// ChunkUploader: copies weight chunks that are not resident on the device
// up for a step, so that computing a layer on the device never waits for
// its weights longer than the copy takes beyond the previous layer's
// compute.
//
// The uploader owns `slots` device buffers of slot_bytes (the VRAM plan's
// copy slots: it never allocates more) and a ring of pinned staging
// buffers. Upload(id) stages the chunk's host bytes (from the RAM pool or
// the stream) through the staging ring and copies them on the copy stream
// into a free slot; Use(slot) makes the compute stream wait for that copy;
// Done(slot) marks the compute issued on it, after which the slot may be
// overwritten (the next copy into it waits for that compute on the device,
// not on the host). With two slots that is double buffering: a driver that
// issues layer l's compute and then Upload(l+1) has the copy of l+1 running
// while l computes.
//
// Upload returns once the host bytes are in staging buffers (the caller may
// release the chunk at once); with staging smaller than a chunk the host
// waits for earlier pieces' copies to free a buffer.
//
// Thread-safety: the device's driving thread only.
#ifndef WASTE_DAEMON_GPU_CHUNK_UPLOADER_H_
#define WASTE_DAEMON_GPU_CHUNK_UPLOADER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/gpu/device.h"

namespace waste::gpu {

struct ChunkUploaderOptions {
  int slots = 2;            // Device buffers (2: double buffering).
  uint64_t slot_bytes = 0;  // The largest chunk uploaded.
  int staging_buffers = 2;
  uint64_t staging_bytes = 0;  // Each; 0: slot_bytes (a whole chunk each).
};

struct ChunkUploaderStats {
  int64_t uploads = 0;  // Chunks copied.
  int64_t reuses = 0;   // Uploads answered by a slot that still held the chunk.
  int64_t h2d_bytes = 0;
  double staging_wait_seconds = 0;  // Host time waiting for a staging buffer.
};

class ChunkUploader {
 public:
  static absl::StatusOr<std::unique_ptr<ChunkUploader>> Create(Device* device,
                                                               const ChunkUploaderOptions& options);
  ~ChunkUploader();
  ChunkUploader(const ChunkUploader&) = delete;
  ChunkUploader& operator=(const ChunkUploader&) = delete;

  // Device memory the slots hold (slots x slot_bytes).
  uint64_t device_bytes() const { return options_.slots * options_.slot_bytes; }
  int slots() const { return options_.slots; }

  // Starts copying chunk `id`, `bytes` at `host`, into a free slot and
  // returns the slot. A chunk still in a slot that has not been reused is
  // not copied again. INVALID_ARGUMENT when bytes > slot_bytes;
  // FAILED_PRECONDITION when every slot is loaded or in use (Use and Done
  // the earlier uploads first).
  absl::StatusOr<int> Upload(int64_t id, const uint8_t* host, uint64_t bytes);
  // The compute stream waits for the slot's copy; its device address.
  absl::StatusOr<DevicePtr> Use(int slot);
  // The compute on the slot has been issued; it may be overwritten once
  // that completes.
  absl::Status Done(int slot);

  const ChunkUploaderStats& stats() const { return stats_; }

 private:
  enum class SlotState { kEmpty, kLoaded, kInUse, kDone };
  struct Slot {
    DevicePtr ptr;
    Event ready;  // Recorded on the copy stream after its copy.
    Event freed;  // Recorded on the compute stream after its use.
    SlotState state = SlotState::kEmpty;
    int64_t chunk = -1;
    int64_t done_order = 0;  // When it was last Done (least recent reused first).
  };
  struct Staging {
    void* host = nullptr;
    Event copied;  // Recorded on the copy stream after the copy out of it.
  };

  ChunkUploader(Device* device, const ChunkUploaderOptions& options)
      : device_(device), options_(options) {}
  absl::Status CheckSlot(int slot) const;

  Device* device_;
  ChunkUploaderOptions options_;
  std::vector<Slot> slots_;
  std::vector<Staging> staging_;
  size_t next_staging_ = 0;
  int64_t done_count_ = 0;
  ChunkUploaderStats stats_;
};

}  // namespace waste::gpu

#endif  // WASTE_DAEMON_GPU_CHUNK_UPLOADER_H_
