// Internal to daemon/model: a scoped Acquire/Release of one chunk, and
// where the chunk lives: in host memory from the store, or on the device
// (DeviceWeights), in which case nothing is acquired and slot() is the
// chunk's host shadow (its vectors only; matrices go to the device).
#ifndef WASTE_DAEMON_MODEL_CHUNK_LEASE_H_
#define WASTE_DAEMON_MODEL_CHUNK_LEASE_H_

#include "common/status_macros.h"
#include "daemon/cache/chunk_store.h"
#include "daemon/model/device_weights.h"
#include "daemon/model/model.h"

namespace waste::model::internal {

// Releases an acquired chunk when the scope ends, whatever the path.
class ChunkLease {
 public:
  ChunkLease(cache::ChunkStore* store, memory::ChunkId id, DeviceWeights* device = nullptr)
      : store_(store), id_(id), device_(device) {}
  ChunkLease(const ChunkLease&) = delete;
  ChunkLease& operator=(const ChunkLease&) = delete;
  ~ChunkLease() {
    if (slot_ != nullptr && !on_device_) store_->Release(id_);
  }
  absl::Status Acquire() {
    if (device_ != nullptr && device_->OnDevice(id_)) {
      on_device_ = true;
      slot_ = device_->HostSlot(id_);
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(slot_, store_->Acquire(id_));
    return absl::OkStatus();
  }
  const uint8_t* slot() const { return slot_; }
  // A tensor of this chunk as the CPU kernels read it (in the kInterleaved
  // layout where the store repacked the chunk and the tensor interleaves).
  kernels::WeightView View(const TensorRef& t) const {
    return t.View(slot_, !on_device_ && store_->Repacked(id_));
  }
  memory::ChunkId id() const { return id_; }
  bool on_device() const { return on_device_; }

 private:
  cache::ChunkStore* store_;
  memory::ChunkId id_;
  DeviceWeights* device_;
  const uint8_t* slot_ = nullptr;
  bool on_device_ = false;
};

// Independent products on a device chunk issued as one batch (see
// DeviceWeights::BeginBatch): End() delivers them and says how it went; a
// scope left early (an error) still ends the batch.
class ProductBatch {
 public:
  ProductBatch(DeviceWeights* device, const ChunkLease& chunk)
      : device_(chunk.on_device() ? device : nullptr) {
    if (device_ != nullptr) device_->BeginBatch();
  }
  ProductBatch(const ProductBatch&) = delete;
  ProductBatch& operator=(const ProductBatch&) = delete;
  ~ProductBatch() {
    if (device_ != nullptr) device_->EndBatch().IgnoreError();
  }
  absl::Status End() {
    DeviceWeights* device = device_;
    device_ = nullptr;
    return device != nullptr ? device->EndBatch() : absl::OkStatus();
  }

 private:
  DeviceWeights* device_;
};

}  // namespace waste::model::internal

#endif  // WASTE_DAEMON_MODEL_CHUNK_LEASE_H_
