// StreamingChunkStore's guesses: read-ahead off the access order (a router
// lookahead's experts) that waits for the reads the step needs and stops
// where the next routing proves it wrong (see streaming_store.h).
#include <algorithm>

#include "daemon/cache/streaming_store.h"

namespace waste::cache {

void StreamingChunkStore::PollAndFeedGuesses() {
  if (guess_queue_.empty()) return;
  if (pieces_in_flight_ > 0) PollCompletions(/*min=*/0).IgnoreError();
  FeedGuesses();
}

void StreamingChunkStore::FeedGuesses() {
  size_t next = 0;
  while (next < guess_queue_.size()) {
    // Only on a disk that has nothing needed to read, and a little at a time.
    if (pieces_in_flight_ > guess_pieces_in_flight_) break;
    if (guess_pieces_in_flight_ > 0 && guess_bytes_in_flight_ >= guess_read_bytes_) break;
    const ChunkId id = guess_queue_[next];
    Chunk& c = state_[id];
    if (c.deferred && c.state == State::kAbsent) {
      if (prefetched_outstanding_ >= prefetch_depth_) break;
      absl::StatusOr<int> slot = TakeSlot(id, /*demand=*/false);
      if (!slot.ok() || *slot < 0) break;
      StartRead(id, *slot);
      c.guess_fed = true;
      CountReadAhead(id);
    }
    c.deferred = false;
    if (!c.guess_fed) {  // Read by an Acquire or a later hint meanwhile.
      ++next;
      continue;
    }
    QueuePieces(id, 1, /*needed_now=*/false);
    if (c.queued == pieces_[id].size()) {
      c.guess_fed = false;
      ++next;
    }
  }
  guess_queue_.erase(guess_queue_.begin(), guess_queue_.begin() + static_cast<ptrdiff_t>(next));
  if (!requests_.empty()) SubmitBatch().IgnoreError();  // A broken queue shows at the Acquire.
}

void StreamingChunkStore::PromoteGuess(ChunkId id, bool needed_now) {
  Chunk& c = state_[id];
  c.guess_fed = c.abandoned = false;
  QueuePieces(id, pieces_[id].size(), needed_now);
}

void StreamingChunkStore::DropGuessRead(ChunkId id) {
  Chunk& c = state_[id];
  if (c.error.ok()) {
    // What did reach the slot was read for nothing.
    int64_t bytes = 0;
    for (size_t k = 0; k < c.queued; ++k) bytes += static_cast<int64_t>(pieces_[id][k].length);
    stats_.bytes_read += bytes;
    stats_.wasted_bytes += bytes;
  } else {
    ++streaming_stats_.read_errors;
  }
  DropRead(id);
}

void StreamingChunkStore::ForgetStaleGuesses() {
  // Guesses not all queued yet: those the hint names go on; of the others,
  // one not started is dropped and one started stops after the pieces in
  // flight (its slot goes back when they land).
  auto kept_queue = guess_queue_.begin();
  for (ChunkId id : guess_queue_) {
    Chunk& c = state_[id];
    if (c.deferred && c.state != State::kAbsent) c.deferred = false;
    if (!c.deferred && !c.guess_fed) continue;
    if (c.hint_epoch == epoch_) {
      *kept_queue++ = id;
      continue;
    }
    ++stats_.guesses_stopped;
    if (c.deferred) {
      c.deferred = false;
      continue;
    }
    c.guess_fed = false;
    c.abandoned = true;
    if (c.pending == 0) DropGuessRead(id);
  }
  guess_queue_.erase(kept_queue, guess_queue_.end());
  // Guesses read (or reading) that it does not name again stop holding the
  // read-ahead depth.
  auto kept = guesses_.begin();
  for (ChunkId id : guesses_) {
    Chunk& c = state_[id];
    if (c.prefetched_unused && c.hint_epoch != epoch_) {
      c.prefetched_unused = false;
      --prefetched_outstanding_;
      if (!c.abandoned) {  // Abandoned ones count what they read when they land.
        ++stats_.prefetch_wasted;
        stats_.wasted_bytes += static_cast<int64_t>((*chunks_)[id].slot_bytes);
      }
    }
    if (c.prefetched_unused) {
      *kept++ = id;
    } else {
      c.guess_listed = false;
    }
  }
  guesses_.erase(kept, guesses_.end());
}

}  // namespace waste::cache
