// StreamingChunkStore: a ChunkStore for models larger than their RAM budget.
// The memory plan decides which chunks are pinned; they are read into the
// pool's pinned region when the store is created and never leave. Every
// other chunk goes through a fixed number of streaming slots: equal slots,
// and optionally a few larger ones for the chunks that do not fit those (a
// MoE plan whose trunk streams: expert-sized slots, and trunk-sized ones
// for attention and dense blocks). A chunk only ever takes a slot of its
// size class, so large chunks never evict experts and vice versa:
//   - Acquire of a resident chunk is a hit; of an absent one it issues the
//     chunk's reads (if not already in flight) into a free or evicted slot
//     and waits, counting the wait as I/O wait.
//   - A chunk is referenced from Acquire to Release and never evicted then.
//   - Prefetch(upcoming) starts reads for the next absent chunks, up to
//     prefetch_depth chunks read ahead and not yet used, into free slots or
//     slots the cache policy gives up. It never evicts a chunk in use, a
//     chunk prefetched but not yet used, or a resident chunk needed before
//     the one being read. After the caller's hint it continues along
//     `access_order` (cyclically), and from the last acquired chunk when the
//     hint is empty, so the reads for the next token's first layers start
//     while this token's last layers compute. The reads of the first
//     `needed_now` chunks of the hint go first: what follows them reads
//     behind them (see QueueRead), not alongside. An Acquire's own read
//     runs alongside whatever is in flight.
//   - Chunks of a hint off the access order that are not needed now are
//     guesses (a router lookahead's experts). They wait until no other read
//     is in flight, then read likeliest first a piece at a time, at most
//     guess_read_bytes in flight, so they never take the disk from a read
//     the step waits for. The next hint that names such chunks (the experts
//     a routing chose) settles them: a guess it names as needed now reads
//     the rest of its pieces at once; one it does not name was wrong and
//     stops where it is (not started: dropped; started: its slot goes back
//     when the pieces in flight land; read whole: it becomes ordinary cache
//     and stops counting against the depth).
//   - A failed read fails only the Acquire that needs the chunk, with the
//     chunk, file, offset and errno in the message; its slot is freed, the
//     chunk is absent again and the next Acquire retries it.
// Reads go through one storage::ReadQueue (io_uring or the pread thread
// pool; O_DIRECT when the file was opened so), straight into the slots. The
// queue is polled (without blocking) from Prefetch and Ready, and from
// Acquire while guesses wait, and waited on from Acquire: completions of
// prefetched chunks are noticed then, guesses fed and io_uring's backlog
// refills its ring then.
//
// Nothing on the token path allocates: per-chunk state, the read requests
// and the completion buffer are sized at creation. (The io_uring queue
// keeps a small record per read in flight; that is storage's.)
//
// Ownership: owns the weight pool, the read queue and the policy; borrows
// the file and the chunk specs (both must outlive the store).
// Thread-safety: one engine thread
// calls Acquire/Release/Prefetch/Stats; not thread-safe.
#ifndef WASTE_DAEMON_CACHE_STREAMING_STORE_H_
#define WASTE_DAEMON_CACHE_STREAMING_STORE_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/cache/cache_policy.h"
#include "daemon/cache/chunk_store.h"
#include "daemon/memory/plan.h"
#include "daemon/memory/pool.h"
#include "storage/aligned_buffer.h"
#include "storage/env.h"

namespace waste::cache {

struct StreamingStoreOptions {
  std::vector<bool> pinned;  // By ChunkId; size = number of chunks.
  // By ChunkId, or empty: chunks another tier holds (the plan's VRAM tier).
  // The store never reads them; acquiring one is FAILED_PRECONDITION and a
  // prefetch hint for one is ignored.
  std::vector<bool> elsewhere;
  int n_slots = 0;
  uint64_t slot_bytes = 0;  // Unpinned chunks up to this size use these slots.
  // Slots for the unpinned chunks larger than slot_bytes (at least the
  // largest of them); 0 when every unpinned chunk fits slot_bytes.
  int n_large_slots = 0;
  uint64_t large_slot_bytes = 0;
  int prefetch_depth = 1;  // Chunks read ahead and not yet used, at most.
  // Bytes of guesses' pieces in flight at most (at least one piece).
  uint64_t guess_read_bytes = 1 << 20;
  PolicyKind policy = kDefaultPolicy;
  std::vector<ChunkId> access_order;  // Empty: follow the hints only.
  storage::ReadQueueOptions io;       // depth is raised to keep a whole slot in flight.
  uint64_t max_read = 4 << 20;        // Reads are split into pieces of at most this.
  memory::PoolOptions pool;
  // If set, called once on each pinned chunk's slot after it is read and
  // before Create returns, to rewrite it in place (the loader repacks the
  // resident matrices for the CPU kernels: model/resident_layout.h);
  // Repacked() is then true for the pinned chunks.
  std::function<void(ChunkId, uint8_t* slot)> repack_pinned;

  // Pinned set, the chunks in VRAM, slots and prefetch depth as `plan`
  // says; for a MoE plan the expert policy (kDefaultExpertPolicy), else
  // kDefaultPolicy.
  static StreamingStoreOptions FromPlan(const memory::MemoryPlan& plan);
};

// Counters beyond ChunkStoreStats.
struct StreamingStoreStats {
  int64_t pinned_hits = 0;  // Of ChunkStoreStats::hits, those on pinned chunks.
  int64_t evictions = 0;
  int64_t read_errors = 0;  // Chunks whose read failed.
};

class StreamingChunkStore final : public ChunkStore {
 public:
  // Allocates the pool and reads the pinned chunks. Errors: options that do
  // not fit `chunks` (INVALID_ARGUMENT), the pool cannot be mapped, a pinned
  // chunk cannot be read.
  static absl::StatusOr<std::unique_ptr<StreamingChunkStore>> Create(
      storage::Env* env, const storage::RandomAccessFile& file,
      const std::vector<ChunkSpec>& chunks, const StreamingStoreOptions& options);
  ~StreamingChunkStore() override;

  absl::StatusOr<const uint8_t*> Acquire(ChunkId id) override;
  void Release(ChunkId id) override;
  using ChunkStore::Prefetch;
  void Prefetch(std::span<const ChunkId> upcoming, size_t needed_now) override;
  bool Ready(ChunkId id) override;
  absl::Status ReadPart(ChunkId id, uint64_t offset, uint64_t length, uint8_t* dst) override;
  ChunkStoreStats Stats() const override;
  bool Repacked(ChunkId id) const override;

  StreamingStoreStats StreamingStats() const { return streaming_stats_; }
  const memory::WeightPool& pool() const { return *pool_; }
  const char* policy_name() const { return policy_->Name(); }
  storage::IoEngine io_engine() const { return queue_->Engine(); }
  int prefetch_depth() const { return prefetch_depth_; }
  // Changes how far ahead Prefetch reads (0 turns it off), capped at the
  // slots (both sizes) - 1.
  void set_prefetch_depth(int depth);

  // Acquires of each chunk since creation, by ChunkId (the warm hotlist's
  // source: see hotlist.h).
  std::span<const uint32_t> acquire_counts() const { return acquire_counts_; }

  // Reads `ids` (hottest first) into free streaming slots and waits for
  // them, so a restarted daemon starts warm; never evicts: skips chunks
  // whose size class has no free slot left, and pinned or resident ones. `uses[i]`, when
  // given (same size as ids), seeds the policy's popularity of ids[i].
  // Returns how many chunks were read; a read error is returned as is (the
  // chunks read before it stay).
  absl::StatusOr<int> Preload(std::span<const ChunkId> ids, std::span<const uint64_t> uses = {});

 private:
  enum class State : uint8_t { kPinned, kAbsent, kLoading, kResident };
  struct Piece {
    uint64_t file_offset;
    uint64_t length;
    uint64_t slot_offset;
  };
  struct Chunk {
    State state = State::kAbsent;
    bool prefetched_unused = false;
    int slot = -1;
    int refs = 0;
    int pending = 0;             // Pieces in flight.
    uint64_t protect_epoch = 0;  // == epoch_: needed before what Prefetch reads.
    uint64_t hint_epoch = 0;     // == epoch_: named by the current Prefetch hint.
    bool guess_listed = false;   // In guesses_.
    // Guesses (see FeedGuesses): waiting in guess_queue_ to start; loading
    // piece by piece with pieces left to queue; stopped by a routing that
    // did not name it, dropped when its pieces in flight land.
    bool deferred = false;
    bool guess_fed = false;
    bool abandoned = false;
    uint16_t queued = 0;         // Pieces of the read in flight queued so far.
    uint64_t pinned_offset = 0;  // In the pool's pinned region.
    absl::Status error;          // First failed piece of the read in flight.
    bool elsewhere = false;      // Held by another tier (VRAM): never read here.
    uint8_t slot_class = 0;      // Which slots it reads into (see SlotClass).
    // An embedding table the plan did not pin: never read whole, only
    // ReadPart's rows (straight from the file); Acquire refuses it.
    bool rows_only = false;
    bool repacked = false;  // Pinned and rewritten by repack_pinned.
  };

  StreamingChunkStore(const std::vector<ChunkSpec>* chunks, const StreamingStoreOptions& options);

  // A slot of `id`'s size class for its read: a free one, else the policy's
  // victim among evictable chunks in that class; for an Acquire (`demand`)
  // also a prefetched chunk not yet used (waiting for it when still
  // loading). -1 when none.
  absl::StatusOr<int> TakeSlot(ChunkId id, bool demand);
  // 0 for the equal slots, 1 for the large ones.
  int SlotClass(int slot) const { return slot < n_small_slots_ ? 0 : 1; }
  void FreeSlot(int slot);
  void Evict(ChunkId id);
  // Reads of one Prefetch go to the queue together. The pieces of chunks
  // needed now (Prefetch's needed_now) read side by side, each at the head
  // of a lane (a ReadRequest::chain; past kMaxLanes they join the lanes as
  // followers); the pieces of the chunks after them follow in those lanes
  // in turn, so read-ahead does not take the disk from what the step waits
  // for. Without such a chunk every piece reads alongside the others.
  static constexpr int kMaxLanes = 64;
  // Pieces of one chunk at most (a PieceTag holds the index in 16 bits).
  static constexpr size_t kMaxPieces = 0xffff;
  // Puts chunk `id`'s reads into `slot` on the batch (loading from now on).
  void QueueRead(ChunkId id, int slot, bool needed_now);
  // Makes `id` loading into `slot` with no piece queued yet.
  void StartRead(ChunkId id, int slot);
  // Puts the next `count` pieces of loading chunk `id` on the batch.
  void QueuePieces(ChunkId id, size_t count, bool needed_now);
  // A read request's tag: the chunk, which piece, and whether it was
  // queued as a guess's (counted in guess_pieces_in_flight_).
  struct PieceTag {
    ChunkId id;
    size_t piece;
    bool guess;
    uint64_t Pack() const {
      return static_cast<uint32_t>(id) | uint64_t{piece & 0xffff} << 32 | uint64_t{guess} << 48;
    }
    static PieceTag Unpack(uint64_t tag) {
      return {static_cast<ChunkId>(static_cast<uint32_t>(tag)), (tag >> 32) & 0xffff,
              ((tag >> 48) & 1) != 0};
    }
  };
  // Submits the batch; if the queue is broken, its chunks give their slots
  // back and are absent again.
  absl::Status SubmitBatch();
  // One chunk's reads, alongside whatever is in flight.
  absl::Status IssueRead(ChunkId id, int slot);
  // Waits until chunk `id` has no pieces in flight.
  absl::Status WaitFor(ChunkId id);
  // Waits for at least `min` completions (0: none) and applies them all.
  absl::Status PollCompletions(size_t min = 1);
  // A chunk's last piece came back: resident, or freed with its error kept
  // for the Acquire waiting on it.
  void FinishRead(ChunkId id);
  // One piece fewer in flight (the disk's busy time ends with the last).
  void EndPiece(const PieceTag& tag);
  // Read ahead of need from now on (until acquired or given up): counts
  // against the depth, not evicted for reads until the next Prefetch, listed
  // in guesses_ when off the access order.
  void CountReadAhead(ChunkId id);
  // A loading chunk whose read failed or never started: its slot goes back
  // and it is absent again (a read-ahead no longer counts against the depth).
  void DropRead(ChunkId id);
  bool Evictable(ChunkId id, bool respect_protection) const;
  // A guess (read-ahead off the access order: a lookahead's expert) that
  // the next hint naming such chunks (the experts a routing chose) does not
  // name again was wrong: one not started is dropped, one being fed stops
  // (abandoned), and one read whole stops counting against the read-ahead
  // depth and becomes an ordinary cached chunk that the policy may evict.
  // Otherwise stale guesses would hold the depth and their slots until a
  // demand read had nowhere else to go.
  void ForgetStaleGuesses();
  // Guesses (hint chunks off the access order not needed now) wait in
  // guess_queue_ and read one piece at a time, likeliest first, while no
  // other read is in flight and their pieces in flight are under
  // guess_read_bytes; so they never take the disk from a read the step
  // waits for, and a guess the next routing does not name stops where it
  // is instead of reading on (ForgetStaleGuesses).
  void FeedGuesses();
  // Collects finished reads when guesses wait, then FeedGuesses.
  void PollAndFeedGuesses();
  // Queues every piece left of a guess being read (now needed or acquired).
  void PromoteGuess(ChunkId id, bool needed_now);
  // An abandoned or failed guess whose pieces in flight have landed: its
  // slot goes back (what it read counts as read and wasted).
  void DropGuessRead(ChunkId id);
  absl::Status ReadError(ChunkId id) const;
  // `length` bytes of the file at `file_offset` (a ReadPart's piece).
  absl::Status ReadFileBytes(uint64_t file_offset, uint64_t length, uint8_t* dst);

  const std::vector<ChunkSpec>* chunks_;  // Borrowed from the caller of Create.
  const storage::RandomAccessFile* file_ = nullptr;
  std::vector<Chunk> state_;
  std::vector<std::vector<Piece>> pieces_;
  std::vector<ChunkId> slot_owner_;             // -1: free.
  std::array<std::vector<int>, 2> free_slots_;  // By slot class.
  int n_small_slots_ = 0;
  std::vector<int> order_position_;  // Of each chunk in access_order_, -1 if absent.
  std::vector<ChunkId> access_order_;
  std::vector<storage::ReadRequest> requests_;  // The batch's reads...
  std::vector<ChunkId> batch_;                  // ...their chunks...
  int batch_lanes_ = 0;                         // ...its lanes...
  int batch_followers_ = 0;                     // ...and pieces queued in them.
  std::vector<storage::ReadCompletion> completions_;
  std::vector<uint32_t> acquire_counts_;
  std::vector<ChunkId> guesses_;       // Guesses started, maybe used since.
  std::vector<ChunkId> guess_queue_;   // Deferred and fed guesses, likeliest first.
  storage::AlignedBuffer row_buffer_;  // ReadPart's aligned window (O_DIRECT files).

  std::unique_ptr<memory::WeightPool> pool_;
  std::unique_ptr<storage::ReadQueue> queue_;
  std::unique_ptr<CachePolicy> policy_;
  int prefetch_depth_ = 0;
  int prefetched_outstanding_ = 0;  // Chunks prefetched and not yet used.
  int pieces_in_flight_ = 0;
  int guess_pieces_in_flight_ = 0;
  uint64_t guess_bytes_in_flight_ = 0;
  uint64_t guess_read_bytes_ = 0;
  uint64_t epoch_ = 0;
  ChunkId last_acquired_ = -1;
  absl::Time busy_since_;
  ChunkStoreStats stats_;
  StreamingStoreStats streaming_stats_;
};

}  // namespace waste::cache

#endif  // WASTE_DAEMON_CACHE_STREAMING_STORE_H_
