// LFU with ageing, for routed experts: a chunk's use count survives its
// eviction (it is the expert's popularity, not its current stay), and every
// `period` uses all counts halve, so popularity follows the recent routing
// rather than the whole history. The victim is the resident chunk with the
// lowest count; ties go to the least recently used.
//
// Why not plain LFU (lfu_policy.cc): its counts restart on re-entry, which
// suits a dense model's cyclic scan, but for experts the evidence that an
// expert is popular is exactly its uses before it was last evicted; with
// counts reset, a popular expert that comes back is as evictable as one
// used once. Why not LRU: routing is a skewed random draw, not a scan with
// locality, and recency alone evicts a hot expert after one quiet stretch.
// routing_trace_test.cc and `policy_sim` measure all three on recorded and
// skewed traces.
//
// Victim search scans the chunk ids (no heap): a few thousand comparisons
// per miss is nothing next to a multi-megabyte read. Nothing allocates
// after construction.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/logging.h"
#include "daemon/cache/cache_policy.h"

namespace waste::cache {
namespace {

class LfuAgedPolicy final : public CachePolicy {
 public:
  explicit LfuAgedPolicy(int n_chunks)
      : count_(n_chunks, 0),
        last_use_(n_chunks, 0),
        resident_(n_chunks, false),
        // Halve about every 4 uses per chunk: long enough that a popular
        // expert's count stands out, short enough that a shift in topic
        // (a new prompt) is followed within a few hundred tokens.
        period_(std::max<uint64_t>(1024, 4 * static_cast<uint64_t>(n_chunks))) {}

  const char* Name() const override { return "lfu-aged"; }

  void OnInsert(ChunkId id) override {
    WCHECK(id >= 0 && static_cast<size_t>(id) < count_.size()) << "chunk " << id;
    resident_[id] = true;
    last_use_[id] = tick_;
  }
  void OnUse(ChunkId id) override {
    // Weighted by 2 so that a single use survives one halving.
    count_[id] += 2;
    last_use_[id] = ++tick_;
    if (++uses_ % period_ == 0) {
      for (uint32_t& c : count_) c >>= 1;
    }
  }
  void OnRemove(ChunkId id) override { resident_[id] = false; }
  void Seed(ChunkId id, uint64_t uses) override {
    WCHECK(id >= 0 && static_cast<size_t>(id) < count_.size()) << "chunk " << id;
    count_[id] = static_cast<uint32_t>(std::min<uint64_t>(2 * uses, UINT32_MAX / 2));
  }

  ChunkId PickVictim(absl::FunctionRef<bool(ChunkId)> evictable) override {
    ChunkId best = -1;
    for (ChunkId id = 0; id < static_cast<ChunkId>(count_.size()); ++id) {
      if (!resident_[id] || !evictable(id)) continue;
      if (best == -1 || count_[id] < count_[best] ||
          (count_[id] == count_[best] && last_use_[id] < last_use_[best])) {
        best = id;
      }
    }
    return best;
  }

 private:
  std::vector<uint32_t> count_;
  std::vector<uint64_t> last_use_;
  std::vector<bool> resident_;
  uint64_t period_;
  uint64_t uses_ = 0;
  uint64_t tick_ = 0;
};

}  // namespace

std::unique_ptr<CachePolicy> NewLfuAgedPolicy(int n_chunks) {
  return std::make_unique<LfuAgedPolicy>(n_chunks);
}

}  // namespace waste::cache
