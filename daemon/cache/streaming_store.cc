#include "daemon/cache/streaming_store.h"

#include <sys/stat.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "daemon/cache/resident_store.h"

namespace waste::cache {

StreamingStoreOptions StreamingStoreOptions::FromPlan(const memory::MemoryPlan& plan) {
  StreamingStoreOptions options;
  options.pinned = plan.is_pinned;
  if (plan.vram.enabled()) options.elsewhere = plan.in_vram;
  options.n_slots = plan.streaming_slots - plan.large_slots;
  options.slot_bytes = plan.slot_bytes;
  options.n_large_slots = plan.large_slots;
  options.large_slot_bytes = plan.large_slot_bytes;
  options.prefetch_depth = plan.prefetch_depth;
  options.access_order = plan.access_order;
  options.policy = plan.sizes.moe ? kDefaultExpertPolicy : kDefaultPolicy;
  return options;
}

StreamingChunkStore::StreamingChunkStore(const std::vector<ChunkSpec>* chunks,
                                         const StreamingStoreOptions& options)
    : chunks_(chunks), access_order_(options.access_order) {}

StreamingChunkStore::~StreamingChunkStore() {
  // The kernel may still be writing into slots: let reads land before the
  // pool is unmapped.
  if (queue_ != nullptr) {
    while (queue_->Outstanding() > 0) {
      completions_.clear();
      if (!queue_->Wait(1, &completions_).ok()) break;
    }
  }
}

absl::StatusOr<std::unique_ptr<StreamingChunkStore>> StreamingChunkStore::Create(
    storage::Env* env, const storage::RandomAccessFile& file, const std::vector<ChunkSpec>& chunks,
    const StreamingStoreOptions& options) {
  const size_t n = chunks.size();
  if (options.pinned.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("the pinned set names ", options.pinned.size(), " chunks; the model has ", n));
  }
  if (!options.elsewhere.empty() && options.elsewhere.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("the set of chunks held elsewhere names ",
                                                   options.elsewhere.size(), " chunks, not ", n));
  }
  if (options.n_slots < 0 || options.n_large_slots < 0 || options.max_read == 0 ||
      options.max_read % storage::kDirectIoAlignment != 0) {
    return absl::InvalidArgumentError(absl::StrCat("bad streaming options: ", options.n_slots,
                                                   " + ", options.n_large_slots,
                                                   " slots, max_read ", options.max_read));
  }
  auto store = std::unique_ptr<StreamingChunkStore>(new StreamingChunkStore(&chunks, options));
  store->file_ = &file;
  store->state_.resize(n);
  store->pieces_.resize(n);
  store->order_position_.assign(n, -1);
  store->acquire_counts_.assign(n, 0);
  uint64_t pinned_bytes = 0;
  size_t max_pieces = 1;
  uint64_t row_window = 0;
  for (size_t i = 0; i < n; ++i) {
    const ChunkSpec& chunk = chunks[i];
    if (chunk.id != static_cast<ChunkId>(i)) {
      return absl::InvalidArgumentError(
          absl::StrCat("chunk ", chunk.name, " has id ", chunk.id, " at index ", i));
    }
    Chunk& c = store->state_[i];
    if (options.pinned[i]) {
      c.state = State::kPinned;
      c.pinned_offset = pinned_bytes;
      pinned_bytes += storage::AlignUp(chunk.slot_bytes, storage::kDirectIoAlignment);
      continue;
    }
    if (!options.elsewhere.empty() && options.elsewhere[i]) {
      c.elsewhere = true;
      continue;
    }
    if (chunk.kind == ChunkKind::kEmbeddings) {
      c.rows_only = true;
      // An O_DIRECT read of a row covers its aligned blocks: room for them
      // now, so a token's row read allocates nothing.
      const uint64_t a = file.Alignment();
      row_window = std::max(row_window, storage::AlignUp(chunk.row_bytes, a) + a);
      continue;
    }
    if (options.n_slots > 0 && chunk.slot_bytes <= options.slot_bytes) {
      c.slot_class = 0;
    } else if (options.n_large_slots > 0 && chunk.slot_bytes <= options.large_slot_bytes) {
      c.slot_class = 1;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "chunk ", chunk.name, " (", chunk.slot_bytes, " bytes) is not pinned and fits none of ",
          options.n_slots, " streaming slots of ", options.slot_bytes, " bytes and ",
          options.n_large_slots, " of ", options.large_slot_bytes, " bytes"));
    }
    for (const ChunkRead& read : chunk.reads) {
      for (uint64_t done = 0; done < read.length; done += options.max_read) {
        store->pieces_[i].push_back({read.file_offset + done,
                                     std::min(options.max_read, read.length - done),
                                     read.slot_offset + done});
      }
    }
    max_pieces = std::max(max_pieces, store->pieces_[i].size());
    if (max_pieces > kMaxPieces) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", chunk.name, " needs ", max_pieces,
                                                     " reads of at most ", options.max_read,
                                                     " bytes; the limit is ", kMaxPieces));
    }
  }
  for (size_t p = 0; p < store->access_order_.size(); ++p) {
    ChunkId id = store->access_order_[p];
    if (id < 0 || static_cast<size_t>(id) >= n) {
      return absl::InvalidArgumentError(absl::StrCat("access order names chunk ", id));
    }
    store->order_position_[id] = static_cast<int>(p);
  }

  ASSIGN_OR_RETURN(store->pool_,
                   memory::WeightPool::Create(
                       memory::PoolLayout{pinned_bytes, options.slot_bytes, options.n_slots,
                                          options.large_slot_bytes, options.n_large_slots},
                       options.pool));
  // Deep enough that every slot's reads can be in flight at once: io_uring
  // only refills from its backlog when polled, and a chunk needed now must
  // not wait there behind read-aheads.
  const int total_slots = options.n_slots + options.n_large_slots;
  storage::ReadQueueOptions io = options.io;
  io.depth = std::max<int>(
      io.depth, static_cast<int>(std::min<size_t>(
                    std::max<size_t>(2, static_cast<size_t>(total_slots)) * max_pieces, 256)));
  ASSIGN_OR_RETURN(store->queue_, env->NewReadQueue(&file, io));
  store->policy_ = NewCachePolicy(options.policy, static_cast<int>(n));
  store->n_small_slots_ = options.n_slots;
  store->slot_owner_.assign(total_slots, -1);
  for (int s = total_slots - 1; s >= 0; --s) {
    store->free_slots_[store->SlotClass(s)].push_back(s);
  }
  if (file.Direct() && row_window > 0) {
    store->row_buffer_ = storage::AlignedBuffer(row_window, file.Alignment());
  }
  store->requests_.reserve(max_pieces * std::max(1, total_slots));
  store->batch_.reserve(total_slots);
  store->guesses_.reserve(total_slots);
  store->guess_queue_.reserve(n);
  store->guess_read_bytes_ = options.guess_read_bytes;
  store->completions_.reserve(max_pieces * std::max(1, total_slots) + 16);
  store->set_prefetch_depth(options.prefetch_depth);

  // Pinned chunks: read once, now.
  std::vector<const ChunkSpec*> specs;
  std::vector<uint8_t*> slots;
  for (size_t i = 0; i < n; ++i) {
    if (!options.pinned[i]) continue;
    specs.push_back(&chunks[i]);
    slots.push_back(store->pool_->pinned() + store->state_[i].pinned_offset);
    store->stats_.bytes_read += static_cast<int64_t>(chunks[i].slot_bytes);
  }
  absl::Time start = absl::Now();
  RETURN_IF_ERROR(ReadChunksBlocking(store->queue_.get(), specs, slots, options.max_read));
  if (options.repack_pinned) {
    for (size_t i = 0, k = 0; i < n; ++i) {
      if (!options.pinned[i]) continue;
      options.repack_pinned(static_cast<ChunkId>(i), slots[k++]);
      store->state_[i].repacked = true;
    }
  }
  store->stats_.read_busy_seconds += absl::ToDoubleSeconds(absl::Now() - start);
  store->stats_.resident_bytes = static_cast<int64_t>(pinned_bytes);
  store->stats_.capacity_bytes = static_cast<int64_t>(store->pool_->bytes());
  return store;
}

bool StreamingChunkStore::Repacked(ChunkId id) const {
  WCHECK(id >= 0 && static_cast<size_t>(id) < state_.size()) << "chunk " << id;
  return state_[id].repacked;
}

void StreamingChunkStore::set_prefetch_depth(int depth) {
  prefetch_depth_ = std::clamp(depth, 0, std::max(0, static_cast<int>(slot_owner_.size()) - 1));
}

bool StreamingChunkStore::Evictable(ChunkId id, bool respect_protection) const {
  const Chunk& c = state_[id];
  return c.state == State::kResident && c.refs == 0 && !c.prefetched_unused &&
         !(respect_protection && c.protect_epoch == epoch_);
}

void StreamingChunkStore::Evict(ChunkId id) {
  Chunk& c = state_[id];
  WCHECK(c.state == State::kResident && c.refs == 0) << (*chunks_)[id].name;
  policy_->OnRemove(id);
  if (c.prefetched_unused) {
    c.prefetched_unused = false;
    --prefetched_outstanding_;
    ++stats_.prefetch_wasted;
    stats_.wasted_bytes += static_cast<int64_t>((*chunks_)[id].slot_bytes);
  }
  FreeSlot(c.slot);
  c.slot = -1;
  c.state = State::kAbsent;
  stats_.resident_bytes -= static_cast<int64_t>((*chunks_)[id].slot_bytes);
  ++streaming_stats_.evictions;
}

void StreamingChunkStore::FreeSlot(int slot) {
  slot_owner_[slot] = -1;
  free_slots_[SlotClass(slot)].push_back(slot);
}

absl::StatusOr<int> StreamingChunkStore::TakeSlot(ChunkId id, bool demand) {
  const int cls = state_[id].slot_class;
  std::vector<int>& free = free_slots_[cls];
  if (free.empty()) {
    ChunkId victim = policy_->PickVictim([&](ChunkId other) {
      return state_[other].slot_class == cls && Evictable(other, /*respect_protection=*/!demand);
    });
    if (victim < 0 && demand) {
      // Rather waste a read-ahead than fail the chunk needed now; prefer one
      // that has landed over one still in flight.
      for (int pass = 0; pass < 2 && victim < 0; ++pass) {
        for (ChunkId owner : slot_owner_) {
          if (owner < 0 || state_[owner].slot_class != cls || !state_[owner].prefetched_unused) {
            continue;
          }
          if (pass == 0 && state_[owner].state != State::kResident) continue;
          if (state_[owner].state == State::kLoading) {
            absl::Status status = WaitFor(owner);
            (void)status;  // A failed read-ahead frees its slot itself.
          }
          victim = owner;
          break;
        }
      }
      if (victim >= 0 && state_[victim].state != State::kResident) {
        // Its read failed and it already gave its slot back.
        victim = -1;
      }
    }
    if (victim >= 0) Evict(victim);
  }
  if (free.empty()) {
    if (!demand) return -1;
    const int n = cls == 0 ? n_small_slots_ : static_cast<int>(slot_owner_.size()) - n_small_slots_;
    return absl::ResourceExhaustedError(absl::StrCat(
        "all ", n, cls == 0 ? "" : " large", " streaming slots hold chunks in use; the plan ",
        "gives this model too few slots (raise --ram-budget)"));
  }
  int slot = free.back();
  free.pop_back();
  return slot;
}

void StreamingChunkStore::QueueRead(ChunkId id, int slot, bool needed_now) {
  StartRead(id, slot);
  QueuePieces(id, pieces_[id].size(), needed_now);
}

void StreamingChunkStore::StartRead(ChunkId id, int slot) {
  Chunk& c = state_[id];
  slot_owner_[slot] = id;
  c.slot = slot;
  c.state = State::kLoading;
  c.pending = 0;
  c.queued = 0;
  c.error = absl::OkStatus();
}

void StreamingChunkStore::QueuePieces(ChunkId id, size_t count, bool needed_now) {
  Chunk& c = state_[id];
  uint8_t* base = pool_->slot(c.slot);
  const std::vector<Piece>& pieces = pieces_[id];
  for (; count > 0 && c.queued < pieces.size(); --count) {
    const Piece& piece = pieces[c.queued];
    // A piece needed now heads a lane of its own; a later one follows the
    // lanes in turn (none: it reads alongside).
    uint16_t chain = 0;
    if (needed_now && batch_lanes_ < kMaxLanes) {
      chain = static_cast<uint16_t>(++batch_lanes_);
    } else if (batch_lanes_ > 0) {
      chain = static_cast<uint16_t>(1 + batch_followers_++ % batch_lanes_);
    }
    requests_.push_back({piece.file_offset, piece.length,
                         reinterpret_cast<char*>(base + piece.slot_offset),
                         PieceTag{id, c.queued, c.guess_fed}.Pack(), chain});
    if (c.guess_fed) {
      ++guess_pieces_in_flight_;
      guess_bytes_in_flight_ += piece.length;
    }
    ++c.queued;
    ++c.pending;
    if (pieces_in_flight_++ == 0) busy_since_ = absl::Now();
  }
  batch_.push_back(id);
}

absl::Status StreamingChunkStore::SubmitBatch() {
  absl::Status status = queue_->Submit(requests_);
  if (!status.ok()) {
    for (const storage::ReadRequest& request : requests_) {
      const PieceTag tag = PieceTag::Unpack(request.tag);
      EndPiece(tag);
      --state_[tag.id].pending;
    }
    for (ChunkId id : batch_) {
      // Pieces that did go out earlier still land in the slot: wait for them.
      Chunk& c = state_[id];
      if (c.state != State::kLoading) continue;  // Listed twice.
      c.error = status;
      if (c.pending > 0) {
        c.queued = static_cast<uint16_t>(pieces_[id].size());
        c.guess_fed = false;
        continue;
      }
      DropRead(id);
    }
  }
  requests_.clear();
  batch_lanes_ = batch_followers_ = 0;
  batch_.clear();
  return status;
}

absl::Status StreamingChunkStore::IssueRead(ChunkId id, int slot) {
  QueueRead(id, slot, /*needed_now=*/false);
  return SubmitBatch();
}

absl::Status StreamingChunkStore::PollCompletions(size_t min) {
  completions_.clear();
  ASSIGN_OR_RETURN(size_t got, queue_->Wait(min, &completions_));
  (void)got;
  for (const storage::ReadCompletion& done : completions_) {
    const PieceTag tag = PieceTag::Unpack(done.tag);
    Chunk& c = state_[tag.id];
    WCHECK(c.state == State::kLoading && c.pending > 0) << (*chunks_)[tag.id].name;
    EndPiece(tag);
    if (!done.status.ok() && c.error.ok()) c.error = done.status;
    if (--c.pending > 0) continue;
    if (c.queued == pieces_[tag.id].size()) {
      FinishRead(tag.id);
    } else if (c.abandoned || !c.error.ok()) {
      DropGuessRead(tag.id);
    }
    // Else a guess between pieces: FeedGuesses queues its next one.
  }
  return absl::OkStatus();
}

void StreamingChunkStore::EndPiece(const PieceTag& tag) {
  if (tag.guess) {
    --guess_pieces_in_flight_;
    guess_bytes_in_flight_ -= pieces_[tag.id][tag.piece].length;
  }
  if (--pieces_in_flight_ == 0) {
    stats_.read_busy_seconds += absl::ToDoubleSeconds(absl::Now() - busy_since_);
  }
}

void StreamingChunkStore::CountReadAhead(ChunkId id) {
  Chunk& c = state_[id];
  c.prefetched_unused = true;
  c.protect_epoch = epoch_;
  ++prefetched_outstanding_;
  if (order_position_[id] < 0 && !c.guess_listed) {
    c.guess_listed = true;
    guesses_.push_back(id);
  }
}

void StreamingChunkStore::DropRead(ChunkId id) {
  Chunk& c = state_[id];
  FreeSlot(c.slot);
  c.slot = -1;
  c.state = State::kAbsent;
  c.guess_fed = c.abandoned = false;
  if (c.prefetched_unused) {
    c.prefetched_unused = false;
    --prefetched_outstanding_;
  }
}

void StreamingChunkStore::FinishRead(ChunkId id) {
  Chunk& c = state_[id];
  c.abandoned = false;
  if (c.error.ok()) {
    c.state = State::kResident;
    policy_->OnInsert(id);
    stats_.bytes_read += static_cast<int64_t>((*chunks_)[id].slot_bytes);
    stats_.resident_bytes += static_cast<int64_t>((*chunks_)[id].slot_bytes);
    return;
  }
  // The slot goes back; the error stays for an Acquire waiting on it. A
  // read-ahead nobody waits for just disappears: the Acquire that needs the
  // chunk reads it again and meets the error itself if it persists.
  ++streaming_stats_.read_errors;
  DropRead(id);
}

absl::Status StreamingChunkStore::WaitFor(ChunkId id) {
  if (state_[id].state == State::kLoading && state_[id].queued < pieces_[id].size()) {
    PromoteGuess(id, /*now=*/true);
    SubmitBatch().IgnoreError();  // A failure is the chunk's error now.
  }
  while (state_[id].state == State::kLoading) RETURN_IF_ERROR(PollCompletions());
  return ReadError(id);
}

absl::Status StreamingChunkStore::ReadError(ChunkId id) const {
  const Chunk& c = state_[id];
  if (c.error.ok()) return absl::OkStatus();
  const ChunkSpec& spec = (*chunks_)[id];
  // A file that shrank or went away under the model will not read again;
  // say so (the engine reloads a changed file at the next request).
  std::string next = "; the chunk stays unloaded and the next request retries it";
  struct stat st;
  if (::stat(file_->Path().c_str(), &st) != 0) {
    next = "; the model file is gone: it was deleted or moved while loaded";
  } else if (static_cast<uint64_t>(st.st_size) != file_->Size()) {
    next = absl::StrCat("; the model file changed size since it was loaded (", file_->Size(),
                        " -> ", st.st_size,
                        " bytes): it was truncated or replaced, and the next request reloads it");
  }
  return absl::Status(c.error.code(), absl::StrCat("reading weight chunk ", spec.name, " (id ", id,
                                                   ", ", spec.slot_bytes, " bytes) from ",
                                                   file_->Path(), ": ", c.error.message(), next));
}

absl::StatusOr<const uint8_t*> StreamingChunkStore::Acquire(ChunkId id) {
  WCHECK(id >= 0 && static_cast<size_t>(id) < state_.size()) << "chunk " << id;
  Chunk& c = state_[id];
  if (c.elsewhere) {
    return absl::FailedPreconditionError(absl::StrCat(
        "chunk ", (*chunks_)[id].name, " is held by another tier (VRAM), not this store"));
  }
  if (c.rows_only) {
    return absl::FailedPreconditionError(absl::StrCat(
        "chunk ", (*chunks_)[id].name, " stays on disk; only its rows are read (ReadPart)"));
  }
  last_acquired_ = id;
  ++acquire_counts_[id];
  if (c.state == State::kPinned) {
    ++stats_.hits;
    ++streaming_stats_.pinned_hits;
    ++c.refs;
    PollAndFeedGuesses();
    return pool_->pinned() + c.pinned_offset;
  }
  if (c.prefetched_unused) {
    c.prefetched_unused = false;
    --prefetched_outstanding_;
    ++stats_.prefetch_hits;
  }
  if (c.state == State::kResident) {
    ++stats_.hits;
  } else {
    ++stats_.misses;
    absl::Time start = absl::Now();
    absl::Status status;
    if (c.state == State::kAbsent) {
      absl::StatusOr<int> slot = TakeSlot(id, /*demand=*/true);
      status = slot.ok() ? IssueRead(id, *slot) : slot.status();
    }
    if (status.ok()) status = WaitFor(id);
    stats_.io_wait_seconds += absl::ToDoubleSeconds(absl::Now() - start);
    if (!status.ok()) {
      c.error = absl::OkStatus();
      return status;
    }
  }
  ++c.refs;
  policy_->OnUse(id);
  PollAndFeedGuesses();
  return pool_->slot(c.slot);
}

void StreamingChunkStore::Release(ChunkId id) {
  WCHECK(id >= 0 && static_cast<size_t>(id) < state_.size()) << "chunk " << id;
  Chunk& c = state_[id];
  WCHECK(c.refs > 0) << "Release of chunk " << (*chunks_)[id].name << " that is not acquired";
  --c.refs;
}

bool StreamingChunkStore::Ready(ChunkId id) {
  WCHECK(id >= 0 && static_cast<size_t>(id) < state_.size()) << "chunk " << id;
  if (pieces_in_flight_ > 0 && (state_[id].state == State::kLoading || !guess_queue_.empty())) {
    // A broken queue shows again at the Acquire that waits on it.
    PollCompletions(/*min=*/0).IgnoreError();
  }
  FeedGuesses();
  return state_[id].state == State::kPinned || state_[id].state == State::kResident;
}

absl::Status StreamingChunkStore::ReadPart(ChunkId id, uint64_t offset, uint64_t length,
                                           uint8_t* dst) {
  WCHECK(id >= 0 && static_cast<size_t>(id) < state_.size()) << "chunk " << id;
  if (!state_[id].rows_only) return ChunkStore::ReadPart(id, offset, length, dst);
  // The part's bytes from each of the chunk's reads it overlaps (a row of
  // one tensor lies in one read).
  const absl::Time start = absl::Now();
  const ChunkSpec& spec = (*chunks_)[id];
  uint64_t done = 0;
  for (const ChunkRead& read : spec.reads) {
    const uint64_t from = std::max(offset, read.slot_offset);
    const uint64_t to = std::min(offset + length, read.slot_offset + read.length);
    if (from >= to) continue;
    absl::Status status = ReadFileBytes(read.file_offset + (from - read.slot_offset), to - from,
                                        dst + (from - offset));
    if (!status.ok()) {
      ++streaming_stats_.read_errors;
      return absl::Status(status.code(), absl::StrCat("reading ", length, " bytes of ", spec.name,
                                                      ": ", status.message()));
    }
    done += to - from;
  }
  stats_.io_wait_seconds += absl::ToDoubleSeconds(absl::Now() - start);
  if (done != length) {
    return absl::OutOfRangeError(absl::StrCat("bytes ", offset, "..", offset + length, " of ",
                                              spec.name, " are not all in its ", spec.slot_bytes,
                                              "-byte slot image"));
  }
  ++stats_.part_reads;
  stats_.part_bytes += static_cast<int64_t>(length);
  stats_.bytes_read += static_cast<int64_t>(length);
  return absl::OkStatus();
}

absl::Status StreamingChunkStore::ReadFileBytes(uint64_t file_offset, uint64_t length,
                                                uint8_t* dst) {
  // Direct reads of a small part go through row_buffer_ aligned; the file
  // would otherwise bounce them through a buffer it allocates per read.
  const uint64_t a = file_->Alignment();
  const uint64_t begin = storage::AlignDown(file_offset, a);
  const uint64_t end = storage::AlignUp(file_offset + length, a);
  if (row_buffer_.data() == nullptr || end - begin > row_buffer_.size() || end > file_->Size()) {
    return file_->Read(file_offset, length, reinterpret_cast<char*>(dst));
  }
  RETURN_IF_ERROR(file_->Read(begin, end - begin, row_buffer_.data()));
  std::memcpy(dst, row_buffer_.data() + (file_offset - begin), length);
  return absl::OkStatus();
}

void StreamingChunkStore::Prefetch(std::span<const ChunkId> upcoming, size_t needed_now) {
  if (prefetch_depth_ == 0) return;
  if (pieces_in_flight_ > 0) PollCompletions(/*min=*/0).IgnoreError();
  ++epoch_;
  // Walks the chunks needed next; false when no more reads should start.
  size_t position = 0;
  auto consider = [&](ChunkId id) {
    const bool now = position++ < needed_now;
    Chunk& c = state_[id];
    if (c.state == State::kPinned || c.elsewhere || c.rows_only) return true;
    // A guess still being read that the step now waits for reads the rest
    // at once.
    if (now && c.state == State::kLoading && c.queued < pieces_[id].size()) PromoteGuess(id, now);
    if (c.state != State::kAbsent) {
      c.protect_epoch = epoch_;  // Needed before anything read from here on.
      return true;
    }
    if (!now && order_position_[id] < 0) {
      // A guess: read when nothing needed is (FeedGuesses).
      if (!c.deferred) {
        c.deferred = true;
        guess_queue_.push_back(id);
      }
      return true;
    }
    if (prefetched_outstanding_ >= prefetch_depth_) return false;
    absl::StatusOr<int> slot = TakeSlot(id, /*demand=*/false);
    if (!slot.ok() || *slot < 0) return false;
    QueueRead(id, *slot, now);
    CountReadAhead(id);
    return true;
  };
  bool names_guessable = false;
  for (ChunkId id : upcoming) {
    WCHECK(id >= 0 && static_cast<size_t>(id) < state_.size()) << "chunk " << id;
    state_[id].hint_epoch = epoch_;
    names_guessable |= order_position_[id] < 0 && state_[id].state != State::kPinned;
  }
  if (names_guessable) ForgetStaleGuesses();
  auto walk = [&] {
    for (ChunkId id : upcoming) {
      if (!consider(id)) return;
    }
    ChunkId from = upcoming.empty() ? last_acquired_ : upcoming.back();
    if (access_order_.empty() || from < 0 || order_position_[from] < 0) return;
    const int n = static_cast<int>(access_order_.size());
    for (int step = 1; step < n; ++step) {
      if (!consider(access_order_[(order_position_[from] + step) % n])) return;
    }
  };
  walk();
  SubmitBatch().IgnoreError();  // A broken queue shows at the Acquire.
  FeedGuesses();
}

absl::StatusOr<int> StreamingChunkStore::Preload(std::span<const ChunkId> ids,
                                                 std::span<const uint64_t> uses) {
  WCHECK(uses.empty() || uses.size() == ids.size()) << uses.size() << " vs " << ids.size();
  int issued = 0;
  const int64_t errors_before = streaming_stats_.read_errors;
  absl::Status status;
  for (size_t i = 0; i < ids.size() && status.ok(); ++i) {
    const ChunkId id = ids[i];
    WCHECK(id >= 0 && static_cast<size_t>(id) < state_.size()) << "chunk " << id;
    if (state_[id].state != State::kAbsent || state_[id].elsewhere) continue;
    std::vector<int>& free = free_slots_[state_[id].slot_class];
    if (free.empty()) continue;
    if (!uses.empty()) policy_->Seed(id, uses[i]);
    const int slot = free.back();
    free.pop_back();
    status = IssueRead(id, slot);  // Gives the slot back on failure.
    if (status.ok()) ++issued;
  }
  for (const ChunkId id : ids) {
    if (state_[id].state != State::kLoading) continue;
    absl::Status read = WaitFor(id);
    if (!read.ok() && status.ok()) status = read;
    state_[id].error = absl::OkStatus();  // Absent again; a later Acquire retries.
  }
  if (!status.ok()) return status;
  return issued - static_cast<int>(streaming_stats_.read_errors - errors_before);
}

ChunkStoreStats StreamingChunkStore::Stats() const {
  ChunkStoreStats stats = stats_;
  if (pieces_in_flight_ > 0) {
    stats.read_busy_seconds += absl::ToDoubleSeconds(absl::Now() - busy_since_);
  }
  return stats;
}

}  // namespace waste::cache
