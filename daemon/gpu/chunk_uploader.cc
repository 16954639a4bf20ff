#include "daemon/gpu/chunk_uploader.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace waste::gpu {

absl::StatusOr<std::unique_ptr<ChunkUploader>> ChunkUploader::Create(
    Device* device, const ChunkUploaderOptions& options) {
  if (options.slots < 1 || options.slot_bytes == 0 || options.staging_buffers < 1) {
    return absl::InvalidArgumentError(
        "a chunk uploader needs at least one slot of some bytes and one staging buffer");
  }
  ChunkUploaderOptions o = options;
  if (o.staging_bytes == 0) o.staging_bytes = o.slot_bytes;
  auto uploader = std::unique_ptr<ChunkUploader>(new ChunkUploader(device, o));
  for (int i = 0; i < o.slots; ++i) {
    Slot slot;
    ASSIGN_OR_RETURN(slot.ptr, device->Allocate(o.slot_bytes));
    // Pushed at once so the destructor frees what was allocated.
    uploader->slots_.push_back(slot);
    ASSIGN_OR_RETURN(uploader->slots_.back().ready, device->CreateEvent());
    ASSIGN_OR_RETURN(uploader->slots_.back().freed, device->CreateEvent());
  }
  for (int i = 0; i < o.staging_buffers; ++i) {
    uploader->staging_.push_back({});
    ASSIGN_OR_RETURN(uploader->staging_.back().host, device->AllocatePinned(o.staging_bytes));
    ASSIGN_OR_RETURN(uploader->staging_.back().copied, device->CreateEvent());
  }
  return uploader;
}

ChunkUploader::~ChunkUploader() {
  // Free synchronizes the device: no copy or product still uses them.
  for (Slot& slot : slots_) {
    if (slot.ptr) device_->Free(slot.ptr);
    if (slot.ready.id >= 0) device_->DestroyEvent(slot.ready);
    if (slot.freed.id >= 0) device_->DestroyEvent(slot.freed);
  }
  for (Staging& staging : staging_) {
    if (staging.host != nullptr) device_->FreePinned(staging.host);
    if (staging.copied.id >= 0) device_->DestroyEvent(staging.copied);
  }
}

absl::Status ChunkUploader::CheckSlot(int slot) const {
  if (slot < 0 || slot >= static_cast<int>(slots_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("no upload slot ", slot));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ChunkUploader::Upload(int64_t id, const uint8_t* host, uint64_t bytes) {
  if (bytes > options_.slot_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", id, " of ", bytes,
                                                   " bytes is larger than the upload slots of ",
                                                   options_.slot_bytes));
  }
  // Still held from an earlier upload: no copy.
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    if (slot.chunk == id && (slot.state == SlotState::kDone || slot.state == SlotState::kLoaded)) {
      slot.state = SlotState::kLoaded;
      ++stats_.reuses;
      return static_cast<int>(i);
    }
  }
  int chosen = -1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& slot = slots_[i];
    if (slot.state == SlotState::kEmpty) {
      chosen = static_cast<int>(i);
      break;
    }
    if (slot.state == SlotState::kDone &&
        (chosen < 0 || slot.done_order < slots_[chosen].done_order)) {
      chosen = static_cast<int>(i);
    }
  }
  if (chosen < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "all ", slots_.size(), " upload slots are loaded or in use; Use and Done them first"));
  }
  Slot& slot = slots_[chosen];
  // The copy may overwrite the slot only after the compute that read it.
  RETURN_IF_ERROR(device_->StreamWait(Stream::kCopy, slot.freed));
  slot.chunk = -1;
  for (uint64_t offset = 0; offset < bytes;) {
    const uint64_t n = std::min(options_.staging_bytes, bytes - offset);
    Staging& staging = staging_[next_staging_];
    next_staging_ = (next_staging_ + 1) % staging_.size();
    const auto wait_start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(device_->EventSynchronize(staging.copied));
    stats_.staging_wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
    std::memcpy(staging.host, host + offset, n);
    device_->Label(Stream::kCopy, absl::StrCat("chunk ", id));
    RETURN_IF_ERROR(device_->CopyToDevice(Stream::kCopy, slot.ptr + offset, staging.host, n));
    RETURN_IF_ERROR(device_->Record(staging.copied, Stream::kCopy));
    offset += n;
  }
  RETURN_IF_ERROR(device_->Record(slot.ready, Stream::kCopy));
  slot.chunk = id;
  slot.state = SlotState::kLoaded;
  ++stats_.uploads;
  stats_.h2d_bytes += static_cast<int64_t>(bytes);
  return chosen;
}

absl::StatusOr<DevicePtr> ChunkUploader::Use(int index) {
  RETURN_IF_ERROR(CheckSlot(index));
  Slot& slot = slots_[index];
  if (slot.state != SlotState::kLoaded) {
    return absl::FailedPreconditionError(absl::StrCat("upload slot ", index, " holds no upload"));
  }
  RETURN_IF_ERROR(device_->StreamWait(Stream::kCompute, slot.ready));
  slot.state = SlotState::kInUse;
  return slot.ptr;
}

absl::Status ChunkUploader::Done(int index) {
  RETURN_IF_ERROR(CheckSlot(index));
  Slot& slot = slots_[index];
  if (slot.state != SlotState::kInUse) {
    return absl::FailedPreconditionError(absl::StrCat("upload slot ", index, " is not in use"));
  }
  RETURN_IF_ERROR(device_->Record(slot.freed, Stream::kCompute));
  slot.state = SlotState::kDone;
  slot.done_order = ++done_count_;
  return absl::OkStatus();
}

}  // namespace waste::gpu
