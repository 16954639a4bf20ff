// ForwardingChunkStore: a ChunkStore that passes every call on to another
// store. Wrappers that watch a store (the bench's routing trace, tests'
// recorders) derive from it and override only what they watch, so a call
// added to ChunkStore reaches the wrapped store without touching them.
//
// Ownership: borrows the wrapped store, which must outlive it.
// Thread-safety: that of the wrapped store.
#ifndef WASTE_DAEMON_CACHE_FORWARDING_STORE_H_
#define WASTE_DAEMON_CACHE_FORWARDING_STORE_H_

#include "daemon/cache/chunk_store.h"

namespace waste::cache {

class ForwardingChunkStore : public ChunkStore {
 public:
  explicit ForwardingChunkStore(ChunkStore* base) : base_(base) {}

  absl::StatusOr<const uint8_t*> Acquire(ChunkId id) override { return base_->Acquire(id); }
  void Release(ChunkId id) override { base_->Release(id); }
  using ChunkStore::Prefetch;
  void Prefetch(std::span<const ChunkId> upcoming, size_t needed_now) override {
    base_->Prefetch(upcoming, needed_now);
  }
  bool Ready(ChunkId id) override { return base_->Ready(id); }
  absl::Status ReadPart(ChunkId id, uint64_t offset, uint64_t length, uint8_t* dst) override {
    return base_->ReadPart(id, offset, length, dst);
  }
  ChunkStoreStats Stats() const override { return base_->Stats(); }
  bool Repacked(ChunkId id) const override { return base_->Repacked(id); }

 protected:
  ChunkStore* base() const { return base_; }

 private:
  ChunkStore* base_;
};

}  // namespace waste::cache

#endif  // WASTE_DAEMON_CACHE_FORWARDING_STORE_H_
