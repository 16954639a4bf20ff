// ResidentChunkStore: every chunk read once into one buffer at creation and
// kept for the store's life. The fully resident baseline that streamed runs
// are compared against.
#ifndef WASTE_DAEMON_CACHE_RESIDENT_STORE_H_
#define WASTE_DAEMON_CACHE_RESIDENT_STORE_H_

#include <memory>
#include <vector>

#include "daemon/cache/chunk_store.h"
#include "storage/aligned_buffer.h"
#include "storage/env.h"

namespace waste::cache {

// Splits every read of `chunks` into pieces of at most `max_read` bytes,
// submits them to `queue` (slot of chunk i = slots[i]) and waits for all.
// The first failed read's status is returned, prefixed with the chunk name.
absl::Status ReadChunksBlocking(storage::ReadQueue* queue,
                                const std::vector<const ChunkSpec*>& chunks,
                                const std::vector<uint8_t*>& slots, uint64_t max_read = 4 << 20);

class ResidentChunkStore final : public ChunkStore {
 public:
  // Reads every chunk of `chunks` from `file` (which must outlive the call).
  static absl::StatusOr<std::unique_ptr<ResidentChunkStore>> Load(
      storage::Env* env, const storage::RandomAccessFile& file,
      const std::vector<ChunkSpec>& chunks, const storage::ReadQueueOptions& io);

  absl::StatusOr<const uint8_t*> Acquire(ChunkId id) override;
  void Release(ChunkId id) override {}
  ChunkStoreStats Stats() const override { return stats_; }
  bool Repacked(ChunkId) const override { return false; }

 private:
  ResidentChunkStore() = default;

  storage::AlignedBuffer buffer_;
  std::vector<uint64_t> offsets_;  // Of each chunk's slot in buffer_.
  ChunkStoreStats stats_;
};

}  // namespace waste::cache

#endif  // WASTE_DAEMON_CACHE_RESIDENT_STORE_H_
