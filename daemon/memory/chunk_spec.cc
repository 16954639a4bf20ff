#include "daemon/memory/chunk_spec.h"

#include <algorithm>
#include <numeric>

namespace waste::memory {

const char* ChunkKindName(ChunkKind kind) {
  switch (kind) {
    case ChunkKind::kGlobal:
      return "global";
    case ChunkKind::kEmbeddings:
      return "embeddings";
    case ChunkKind::kAttention:
      return "attention";
    case ChunkKind::kFfn:
      return "ffn";
    case ChunkKind::kExpert:
      return "expert";
  }
  return "?";
}

ChunkSpec BuildChunkSpec(ChunkId id, std::string name, int layer, ChunkKind kind,
                         const std::vector<const storage::TensorInfo*>& tensors, uint64_t file_size,
                         std::vector<TensorPlacement>* placements, uint64_t merge_gap) {
  ChunkSpec spec;
  spec.id = id;
  spec.name = std::move(name);
  spec.layer = layer;
  spec.kind = kind;
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors[a]->offset < tensors[b]->offset; });

  size_t first_placement = placements->size();
  placements->resize(first_placement + tensors.size());
  size_t i = 0;
  while (i < order.size()) {
    // Grow a run of extents that are close together in the file.
    uint64_t run_start = tensors[order[i]]->offset / kChunkAlignment * kChunkAlignment;
    uint64_t run_end = tensors[order[i]]->offset + tensors[order[i]]->size;
    size_t j = i + 1;
    while (j < order.size() && tensors[order[j]]->offset <= run_end + merge_gap) {
      run_end = std::max(run_end, tensors[order[j]]->offset + tensors[order[j]]->size);
      ++j;
    }
    uint64_t aligned_end = (run_end + kChunkAlignment - 1) / kChunkAlignment * kChunkAlignment;
    aligned_end = std::min(aligned_end, file_size);
    ChunkRead read{run_start, aligned_end - run_start, spec.slot_bytes};
    for (size_t k = i; k < j; ++k) {
      const storage::TensorInfo* t = tensors[order[k]];
      (*placements)[first_placement + order[k]] = {id, read.slot_offset + (t->offset - run_start)};
      spec.tensor_bytes += t->size;
    }
    spec.slot_bytes += (read.length + kChunkAlignment - 1) / kChunkAlignment * kChunkAlignment;
    spec.reads.push_back(read);
    i = j;
  }
  return spec;
}

}  // namespace waste::memory
