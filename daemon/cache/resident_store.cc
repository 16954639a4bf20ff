#include "daemon/cache/resident_store.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace waste::cache {

absl::Status ReadChunksBlocking(storage::ReadQueue* queue,
                                const std::vector<const ChunkSpec*>& chunks,
                                const std::vector<uint8_t*>& slots, uint64_t max_read) {
  std::vector<storage::ReadRequest> requests;
  for (size_t c = 0; c < chunks.size(); ++c) {
    for (const ChunkRead& read : chunks[c]->reads) {
      for (uint64_t done = 0; done < read.length; done += max_read) {
        uint64_t n = std::min(max_read, read.length - done);
        requests.push_back({read.file_offset + done, n,
                            reinterpret_cast<char*>(slots[c] + read.slot_offset + done), c});
      }
    }
  }
  RETURN_IF_ERROR(queue->Submit(requests));
  std::vector<storage::ReadCompletion> completions;
  absl::Status first_error;
  while (queue->Outstanding() > 0) {
    completions.clear();
    RETURN_IF_ERROR(queue->Wait(1, &completions).status());
    for (const storage::ReadCompletion& done : completions) {
      if (!done.status.ok() && first_error.ok()) {
        first_error = absl::Status(
            done.status.code(),
            absl::StrCat("reading chunk ", chunks[done.tag]->name, ": ", done.status.message()));
      }
    }
  }
  return first_error;
}

absl::StatusOr<std::unique_ptr<ResidentChunkStore>> ResidentChunkStore::Load(
    storage::Env* env, const storage::RandomAccessFile& file, const std::vector<ChunkSpec>& chunks,
    const storage::ReadQueueOptions& io) {
  auto store = std::unique_ptr<ResidentChunkStore>(new ResidentChunkStore());
  uint64_t total = 0;
  for (const ChunkSpec& chunk : chunks) {
    WCHECK(chunk.id == static_cast<ChunkId>(store->offsets_.size()));
    store->offsets_.push_back(total);
    total += chunk.slot_bytes;
  }
  store->buffer_ = storage::AlignedBuffer(std::max<uint64_t>(total, 1));
  if (store->buffer_.data() == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", total, " bytes for the resident weights"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<storage::ReadQueue> queue, env->NewReadQueue(&file, io));
  std::vector<const ChunkSpec*> specs;
  std::vector<uint8_t*> slots;
  for (const ChunkSpec& chunk : chunks) {
    specs.push_back(&chunk);
    slots.push_back(reinterpret_cast<uint8_t*>(store->buffer_.data()) + store->offsets_[chunk.id]);
  }
  RETURN_IF_ERROR(ReadChunksBlocking(queue.get(), specs, slots));
  for (const ChunkSpec& chunk : chunks) store->stats_.bytes_read += chunk.slot_bytes;
  store->stats_.resident_bytes = static_cast<int64_t>(total);
  store->stats_.capacity_bytes = static_cast<int64_t>(total);
  return store;
}

absl::StatusOr<const uint8_t*> ResidentChunkStore::Acquire(ChunkId id) {
  WCHECK(id >= 0 && static_cast<size_t>(id) < offsets_.size()) << "chunk " << id;
  ++stats_.hits;
  return reinterpret_cast<const uint8_t*>(buffer_.data()) + offsets_[id];
}

}  // namespace waste::cache
