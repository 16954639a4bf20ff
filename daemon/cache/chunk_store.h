// ChunkStore: makes weight chunks available in memory while computation
// uses them. The forward pass Acquires a chunk before a layer's work and
// Releases it after; the store decides what is read when and what stays.
//
// Implementations: ResidentChunkStore (every chunk read once at load) and
// the streaming store (a fixed pool, a cache policy and prefetching).
//
// Thread-safety: Acquire/Release/Prefetch are called by one engine thread.
#ifndef WASTE_DAEMON_CACHE_CHUNK_STORE_H_
#define WASTE_DAEMON_CACHE_CHUNK_STORE_H_

#include <cstdint>
#include <cstring>
#include <span>

#include "absl/status/statusor.h"
#include "daemon/memory/chunk_spec.h"

namespace waste::cache {

// The chunk vocabulary belongs to memory/ (the plan is made of chunk specs);
// the cache speaks it unqualified.
using memory::ChunkId;
using memory::ChunkKind;
using memory::ChunkRead;
using memory::ChunkSpec;
using memory::kChunkAlignment;

// Counters of a store; monotonic, summed since creation.
struct ChunkStoreStats {
  int64_t hits = 0;             // Acquires that found the chunk resident.
  int64_t misses = 0;           // Acquires that had to wait for a read.
  int64_t prefetch_hits = 0;    // Chunks read ahead of need, then used.
  int64_t prefetch_wasted = 0;  // Chunks read ahead of need, evicted unused
                                // (or, guesses, not named again: see
                                // StreamingChunkStore).
  int64_t wasted_bytes = 0;     // Their bytes.
  int64_t guesses_stopped = 0;  // Guesses stopped before read whole (their
                                // bytes read are in wasted_bytes).
  int64_t bytes_read = 0;
  int64_t read_retries = 0;
  double io_wait_seconds = 0;    // Time Acquire blocked waiting for reads.
  double read_busy_seconds = 0;  // Time at least one read was in flight.
  int64_t part_reads = 0;        // ReadPart calls served from the file,
  int64_t part_bytes = 0;        // and their bytes (also in bytes_read).
  int64_t resident_bytes = 0;    // Gauge: chunk bytes in memory now.
  int64_t capacity_bytes = 0;    // Gauge: memory the store may use for chunks.
};

class ChunkStore {
 public:
  virtual ~ChunkStore() = default;

  // The chunk's slot in memory, valid until the matching Release. Blocks
  // until its reads have completed. A read failure is an error naming the
  // chunk, file, offset and errno; the store stays usable.
  virtual absl::StatusOr<const uint8_t*> Acquire(ChunkId id) = 0;
  virtual void Release(ChunkId id) = 0;

  // Says which chunks will be acquired next, in order, so reads can start
  // now; the first `needed_now` of them are what the step waits for next
  // (a MoE layer's routed experts), the rest read ahead (guesses, later
  // layers): a store may read those behind the others rather than beside
  // them. A hint: may be ignored; never blocks.
  virtual void Prefetch(std::span<const ChunkId> upcoming, size_t needed_now) {
    (void)upcoming;
    (void)needed_now;
  }
  void Prefetch(std::span<const ChunkId> upcoming) { Prefetch(upcoming, 0); }

  // True when Acquire(id) would not wait for a read now. Never blocks (it
  // may collect finished reads), so a caller with several chunks to use
  // can take first the ones already in memory.
  virtual bool Ready(ChunkId id) {
    (void)id;
    return true;
  }

  // Copies `length` bytes at `offset` of chunk `id`'s slot image to `dst`.
  // For small parts of chunks that need not be in memory: a token's row of
  // an embedding table (ChunkKind::kEmbeddings) that the plan left on disk
  // is read straight from the file; a chunk in memory is copied from there.
  // Errors as Acquire's.
  virtual absl::Status ReadPart(ChunkId id, uint64_t offset, uint64_t length, uint8_t* dst) {
    absl::StatusOr<const uint8_t*> slot = Acquire(id);
    if (!slot.ok()) return slot.status();
    std::memcpy(dst, *slot + offset, length);
    Release(id);
    return absl::OkStatus();
  }

  virtual ChunkStoreStats Stats() const = 0;
  // True when the slot of `id` holds its matrices repacked for the CPU
  // kernels rather than as the file has them (a pinned chunk of a store
  // given StreamingStoreOptions::repack_pinned). Fixed for the store's life.
  // Pure: a store that wraps another must pass the question on.
  virtual bool Repacked(ChunkId id) const = 0;
};

}  // namespace waste::cache

#endif  // WASTE_DAEMON_CACHE_CHUNK_STORE_H_
