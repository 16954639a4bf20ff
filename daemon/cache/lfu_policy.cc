// LFU over the current residency: a chunk's count starts at zero when it
// enters a slot and grows with each use, so the victim is the chunk used
// least since it arrived. Ties go to the MOST recently used: on a cyclic
// scan the chunk just used is the one needed furthest ahead (what Belady's
// optimal policy evicts), and with LRU tie-breaking a scan never lets any
// chunk survive to a second use, so counts never grow and LFU degenerates
// to LRU's thrashing. Counts restart on re-entry so a chunk's old fame does
// not outlive its eviction. Victim search scans the chunk ids (a few
// hundred), no heap.
#include <cstdint>
#include <vector>

#include "common/logging.h"
#include "daemon/cache/cache_policy.h"

namespace waste::cache {
namespace {

class LfuPolicy final : public CachePolicy {
 public:
  explicit LfuPolicy(int n_chunks)
      : count_(n_chunks, 0), last_use_(n_chunks, 0), resident_(n_chunks, false) {}

  const char* Name() const override { return "lfu"; }

  void OnInsert(ChunkId id) override {
    WCHECK(id >= 0 && static_cast<size_t>(id) < count_.size()) << "chunk " << id;
    resident_[id] = true;
    count_[id] = 0;
    last_use_[id] = ++tick_;
  }
  void OnUse(ChunkId id) override {
    ++count_[id];
    last_use_[id] = ++tick_;
  }
  void OnRemove(ChunkId id) override { resident_[id] = false; }

  ChunkId PickVictim(absl::FunctionRef<bool(ChunkId)> evictable) override {
    ChunkId best = -1;
    for (ChunkId id = 0; id < static_cast<ChunkId>(count_.size()); ++id) {
      if (!resident_[id] || !evictable(id)) continue;
      if (best == -1 || count_[id] < count_[best] ||
          (count_[id] == count_[best] && last_use_[id] > last_use_[best])) {
        best = id;
      }
    }
    return best;
  }

 private:
  std::vector<uint64_t> count_;
  std::vector<uint64_t> last_use_;
  std::vector<bool> resident_;
  uint64_t tick_ = 0;
};

}  // namespace

std::unique_ptr<CachePolicy> NewLfuPolicy(int n_chunks) {
  return std::make_unique<LfuPolicy>(n_chunks);
}

}  // namespace waste::cache
