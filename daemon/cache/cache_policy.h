// CachePolicy: which streamed chunk leaves its slot when a slot is needed.
// The streaming store tells the policy what happens to resident chunks
// (inserted into a slot, used, removed) and asks it for a victim among the
// chunks the store says may go (not in use, not prefetched-but-unused, not
// needed before the chunk being read). Pinned chunks never reach a policy.
//
// For a dense model every token reads every chunk once in the same order (a
// cyclic scan). Plain LRU then evicts exactly the chunk needed next and
// never hits once the cycle is longer than the slots; LFU as implemented
// here (use counts since the chunk entered its slot, ties to the most
// recently used) lets the first chunks of a cycle stay and churns the rest
// through the prefetch window, so slots beyond that window turn into hits. The plan's
// pinning is still the main lever: it decides per byte, a policy per slot.
//
// Routed experts are no scan: each token draws a few experts per layer from
// a skewed popularity. There a policy that remembers popularity across
// evictions (lfu_aged_policy.cc) wins; see kDefaultExpertPolicy.
//
// Implementations (each in its own file): lru_policy.cc, lfu_policy.cc,
// lfu_aged_policy.cc.
// Sized for a model's chunk count at creation; no call allocates.
// Thread-safety: none; the store's engine thread is the only caller.
#ifndef WASTE_DAEMON_CACHE_CACHE_POLICY_H_
#define WASTE_DAEMON_CACHE_CACHE_POLICY_H_

#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/cache/chunk_store.h"

namespace waste::cache {

class CachePolicy {
 public:
  virtual ~CachePolicy() = default;
  virtual const char* Name() const = 0;

  // `id` now occupies a slot (read on demand or prefetched, not yet used).
  virtual void OnInsert(ChunkId id) = 0;
  // `id`, resident, was acquired.
  virtual void OnUse(ChunkId id) = 0;
  // `id` left its slot.
  virtual void OnRemove(ChunkId id) = 0;
  // The resident chunk to evict among those `evictable` accepts; -1 if none.
  virtual ChunkId PickVictim(absl::FunctionRef<bool(ChunkId)> evictable) = 0;
  // `id` was used `uses` times in earlier runs (a warm hotlist). Policies
  // that remember popularity start from it; the rest ignore it.
  virtual void Seed(ChunkId id, uint64_t uses) {
    (void)id;
    (void)uses;
  }
};

enum class PolicyKind { kLru, kLfu, kLfuAged };

// The default for dense models: LFU measured better on the dense cyclic
// pattern (see streaming_store_test.cc PolicyOnCyclicScan and the bench
// results in the commit log).
inline constexpr PolicyKind kDefaultPolicy = PolicyKind::kLfu;
// The default for routed experts: LFU with ageing measured best on skewed
// routing traces and no worse on uniform ones (routing_trace_test.cc,
// policy_sim).
inline constexpr PolicyKind kDefaultExpertPolicy = PolicyKind::kLfuAged;

const char* PolicyKindName(PolicyKind kind);
// "lru", "lfu" or "lfu-aged"; anything else is INVALID_ARGUMENT listing the choices.
absl::StatusOr<PolicyKind> ParsePolicyKind(absl::string_view name);

// Policies for chunk ids 0..n_chunks-1.
std::unique_ptr<CachePolicy> NewLruPolicy(int n_chunks);
std::unique_ptr<CachePolicy> NewLfuPolicy(int n_chunks);
std::unique_ptr<CachePolicy> NewLfuAgedPolicy(int n_chunks);
std::unique_ptr<CachePolicy> NewCachePolicy(PolicyKind kind, int n_chunks);

}  // namespace waste::cache

#endif  // WASTE_DAEMON_CACHE_CACHE_POLICY_H_
