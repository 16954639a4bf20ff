// Routing traces of mixture-of-experts models and a replay of them through
// a cache policy, to choose the expert cache's eviction policy on evidence.
//
// A trace is, per token, per MoE layer, the top-k experts the router chose.
// Traces come from a model run (a store wrapper records the expert chunks
// acquired; see daemon/bench/policy_sim.cc) or are synthesized with a
// Zipf-like popularity per layer: a synthetic model's random weights route
// almost uniformly, while trained routers are skewed, and only skew makes
// policies differ.
//
// Thread-safety: plain values and free functions.
#ifndef WASTE_DAEMON_CACHE_ROUTING_TRACE_H_
#define WASTE_DAEMON_CACHE_ROUTING_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/cache/cache_policy.h"

namespace waste::cache {

struct RoutingTrace {
  int n_layers = 0;   // MoE layers.
  int n_experts = 0;  // Per layer.
  int top_k = 0;
  // tokens() x n_layers x top_k expert ids in 0..n_experts-1, token-major.
  std::vector<int32_t> experts;

  int64_t tokens() const {
    const int64_t per_token = static_cast<int64_t>(n_layers) * top_k;
    return per_token > 0 ? static_cast<int64_t>(experts.size()) / per_token : 0;
  }
};

// `tokens` tokens whose experts are drawn per layer without replacement
// from a Zipf(s) popularity over a random permutation of the layer's
// experts (s = 0: uniform). Deterministic for a seed.
RoutingTrace ZipfTrace(int n_layers, int n_experts, int top_k, int64_t tokens, double s,
                       uint64_t seed);

// Text form: a header line "routing-trace v1 LAYERS EXPERTS TOPK", then one
// line per token and layer with its top-k expert ids.
std::string FormatTrace(const RoutingTrace& trace);
absl::StatusOr<RoutingTrace> ParseTrace(const std::string& text);

struct ReplayResult {
  int64_t hits = 0;
  int64_t misses = 0;
  double hit_rate() const { return hits + misses > 0 ? double(hits) / double(hits + misses) : 0; }
};

// Replays `trace` through a fresh policy of `kind` with `slots` expert slots
// (chunk id = layer * n_experts + expert), as the streaming store would: an
// absent expert evicts the policy's victim among those not needed by the
// same layer of the same token. The first `warmup_tokens` fill the cache and
// are not counted.
ReplayResult ReplayTrace(const RoutingTrace& trace, PolicyKind kind, int slots,
                         int64_t warmup_tokens = 0);

}  // namespace waste::cache

#endif  // WASTE_DAEMON_CACHE_ROUTING_TRACE_H_
