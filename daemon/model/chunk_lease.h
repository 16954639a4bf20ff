// Internal to daemon/model: a scoped Acquire/Release of one chunk.
#ifndef WASTE_DAEMON_MODEL_CHUNK_LEASE_H_
#define WASTE_DAEMON_MODEL_CHUNK_LEASE_H_

#include "common/status_macros.h"
#include "daemon/cache/chunk_store.h"

namespace waste::model::internal {

// Releases an acquired chunk when the scope ends, whatever the path.
class ChunkLease {
 public:
  ChunkLease(cache::ChunkStore* store, memory::ChunkId id) : store_(store), id_(id) {}
  ChunkLease(const ChunkLease&) = delete;
  ChunkLease& operator=(const ChunkLease&) = delete;
  ~ChunkLease() {
    if (slot_ != nullptr) store_->Release(id_);
  }
  absl::Status Acquire() {
    ASSIGN_OR_RETURN(slot_, store_->Acquire(id_));
    return absl::OkStatus();
  }
  const uint8_t* slot() const { return slot_; }

 private:
  cache::ChunkStore* store_;
  memory::ChunkId id_;
  const uint8_t* slot_ = nullptr;
};

}  // namespace waste::model::internal

#endif  // WASTE_DAEMON_MODEL_CHUNK_LEASE_H_
