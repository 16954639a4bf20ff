// A weight chunk: the unit the daemon reads from disk, keeps resident or
// evicts — the global tensors, an attention block, a dense FFN, a routed
// expert. A chunk is a set of tensor extents of the model file, read into
// one slot of memory.
//
// These specs are the memory plan's vocabulary (what is pinned, what
// streams, how big a slot is), so memory/ owns them; cache/ (which holds
// chunks in memory, see cache/chunk_store.h) and model/ (which cuts a model
// into chunks) build on them.
//
// Thread-safety: plain values and a free function.
#ifndef WASTE_DAEMON_MEMORY_CHUNK_SPEC_H_
#define WASTE_DAEMON_MEMORY_CHUNK_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "storage/gguf.h"

namespace waste::memory {

using ChunkId = int32_t;

// What a chunk holds; the memory plan and the pin policy decide by it.
enum class ChunkKind {
  kGlobal,  // Output head, final norm (and the embeddings when tied): pinned.
  // The token embedding table of a model with its own output head: a token
  // needs one row of it. Pinned only when everything else is; otherwise
  // never read whole: its rows are read from the file as tokens need them
  // (ChunkStore::ReadPart), so it costs the floor nothing.
  kEmbeddings,
  kAttention,  // One layer's attention block (with its norm).
  kFfn,        // One layer's dense feed-forward block (with its norm), or
               // the trunk of a MoE block: norm, router, shared experts.
  kExpert,     // One routed expert of one layer: its gate/up/down slices.
};

const char* ChunkKindName(ChunkKind kind);

// One read that fills part of a slot: `length` bytes of the file at
// `file_offset` land at `slot_offset`. Offsets are 4096-aligned so the read
// can go straight to the slot with O_DIRECT (only a read ending at the end
// of the file may have an unaligned length).
struct ChunkRead {
  uint64_t file_offset = 0;
  uint64_t length = 0;
  uint64_t slot_offset = 0;
};

struct ChunkSpec {
  ChunkId id = 0;
  std::string name;  // "blk.3.attn", "global".
  int layer = -1;    // -1 for global chunks.
  ChunkKind kind = ChunkKind::kGlobal;
  std::vector<ChunkRead> reads;
  uint64_t slot_bytes = 0;    // Memory the chunk occupies (sum of aligned reads).
  uint64_t tensor_bytes = 0;  // Bytes of its tensors proper.
  uint64_t row_bytes = 0;     // kEmbeddings: one row, what a token reads of it.
};

// Where a tensor lives once its chunk is in memory.
struct TensorPlacement {
  ChunkId chunk = 0;
  uint64_t slot_offset = 0;
};

inline constexpr uint64_t kChunkAlignment = 4096;

// Builds a ChunkSpec for `tensors` (all in one chunk): extents closer than
// `merge_gap` bytes are read in one run. Appends each tensor's placement to
// `placements` (in the order of `tensors`).
ChunkSpec BuildChunkSpec(ChunkId id, std::string name, int layer, ChunkKind kind,
                         const std::vector<const storage::TensorInfo*>& tensors, uint64_t file_size,
                         std::vector<TensorPlacement>* placements, uint64_t merge_gap = 1 << 20);

}  // namespace waste::memory

#endif  // WASTE_DAEMON_MEMORY_CHUNK_SPEC_H_
