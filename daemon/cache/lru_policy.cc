// LRU: an intrusive doubly linked list over chunk ids (arrays sized once),
// most recently used at the head; the victim is the first evictable chunk
// from the tail.
#include <vector>

#include "common/logging.h"
#include "daemon/cache/cache_policy.h"

namespace waste::cache {
namespace {

class LruPolicy final : public CachePolicy {
 public:
  explicit LruPolicy(int n_chunks) : prev_(n_chunks, -1), next_(n_chunks, -1), linked_(n_chunks) {}

  const char* Name() const override { return "lru"; }

  void OnInsert(ChunkId id) override { MoveToHead(id); }
  void OnUse(ChunkId id) override { MoveToHead(id); }
  void OnRemove(ChunkId id) override { Unlink(id); }

  ChunkId PickVictim(absl::FunctionRef<bool(ChunkId)> evictable) override {
    for (ChunkId id = tail_; id != -1; id = prev_[id]) {
      if (evictable(id)) return id;
    }
    return -1;
  }

 private:
  void Unlink(ChunkId id) {
    if (!linked_[id]) return;
    if (prev_[id] != -1) next_[prev_[id]] = next_[id];
    if (next_[id] != -1) prev_[next_[id]] = prev_[id];
    if (head_ == id) head_ = next_[id];
    if (tail_ == id) tail_ = prev_[id];
    prev_[id] = next_[id] = -1;
    linked_[id] = false;
  }

  void MoveToHead(ChunkId id) {
    WCHECK(id >= 0 && static_cast<size_t>(id) < linked_.size()) << "chunk " << id;
    Unlink(id);
    next_[id] = head_;
    if (head_ != -1) prev_[head_] = id;
    head_ = id;
    if (tail_ == -1) tail_ = id;
    linked_[id] = true;
  }

  std::vector<ChunkId> prev_, next_;
  std::vector<bool> linked_;
  ChunkId head_ = -1, tail_ = -1;
};

}  // namespace

std::unique_ptr<CachePolicy> NewLruPolicy(int n_chunks) {
  return std::make_unique<LruPolicy>(n_chunks);
}

}  // namespace waste::cache
