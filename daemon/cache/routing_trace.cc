#include "daemon/cache/routing_trace.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace waste::cache {

RoutingTrace ZipfTrace(int n_layers, int n_experts, int top_k, int64_t tokens, double s,
                       uint64_t seed) {
  RoutingTrace trace;
  trace.n_layers = n_layers;
  trace.n_experts = n_experts;
  trace.top_k = top_k;
  std::mt19937_64 rng(seed);
  // Per layer: which expert has popularity rank r.
  std::vector<std::vector<int32_t>> rank_to_expert(n_layers, std::vector<int32_t>(n_experts));
  for (auto& ranks : rank_to_expert) {
    std::iota(ranks.begin(), ranks.end(), 0);
    std::shuffle(ranks.begin(), ranks.end(), rng);
  }
  std::vector<double> weight(n_experts);
  for (int r = 0; r < n_experts; ++r) weight[r] = 1.0 / std::pow(r + 1, s);
  trace.experts.reserve(tokens * n_layers * top_k);
  std::vector<double> w(n_experts);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int l = 0; l < n_layers; ++l) {
      w = weight;
      for (int j = 0; j < top_k; ++j) {
        std::discrete_distribution<int> pick(w.begin(), w.end());
        const int r = pick(rng);
        w[r] = 0;  // Without replacement: top-k are distinct.
        trace.experts.push_back(rank_to_expert[l][r]);
      }
    }
  }
  return trace;
}

std::string FormatTrace(const RoutingTrace& trace) {
  std::string out = absl::StrCat("routing-trace v1 ", trace.n_layers, " ", trace.n_experts, " ",
                                 trace.top_k, "\n");
  for (size_t i = 0; i < trace.experts.size(); ++i) {
    absl::StrAppend(&out, trace.experts[i], (i + 1) % trace.top_k == 0 ? "\n" : " ");
  }
  return out;
}

absl::StatusOr<RoutingTrace> ParseTrace(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  RoutingTrace trace;
  std::vector<std::string> head = absl::StrSplit(lines.empty() ? "" : lines[0], ' ');
  if (head.size() != 5 || head[0] != "routing-trace" || head[1] != "v1" ||
      !absl::SimpleAtoi(head[2], &trace.n_layers) || !absl::SimpleAtoi(head[3], &trace.n_experts) ||
      !absl::SimpleAtoi(head[4], &trace.top_k) || trace.top_k <= 0 || trace.n_experts <= 0) {
    return absl::InvalidArgumentError(
        "not a routing trace: the first line must be 'routing-trace v1 LAYERS EXPERTS TOPK'");
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    for (absl::string_view field : absl::StrSplit(lines[i], ' ', absl::SkipEmpty())) {
      int32_t e;
      if (!absl::SimpleAtoi(field, &e) || e < 0 || e >= trace.n_experts) {
        return absl::InvalidArgumentError(
            absl::StrCat("routing trace line ", i + 1, ": '", field, "' is not an expert id"));
      }
      trace.experts.push_back(e);
    }
  }
  return trace;
}

ReplayResult ReplayTrace(const RoutingTrace& trace, PolicyKind kind, int slots,
                         int64_t warmup_tokens) {
  const int n = trace.n_layers * trace.n_experts;
  std::unique_ptr<CachePolicy> policy = NewCachePolicy(kind, n);
  std::vector<bool> resident(n, false);
  std::vector<int> needed(n, -1);  // Step that needs the chunk now.
  int used = 0;
  ReplayResult result;
  const int64_t tokens = trace.tokens();
  size_t i = 0;
  int step = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int l = 0; l < trace.n_layers; ++l, ++step) {
      for (int j = 0; j < trace.top_k; ++j) {
        needed[l * trace.n_experts + trace.experts[i + j]] = step;
      }
      for (int j = 0; j < trace.top_k; ++j, ++i) {
        const ChunkId id = l * trace.n_experts + trace.experts[i];
        const bool counted = t >= warmup_tokens;
        if (resident[id]) {
          result.hits += counted;
        } else {
          result.misses += counted;
          if (used == slots) {
            ChunkId victim = policy->PickVictim([&](ChunkId c) { return needed[c] != step; });
            if (victim < 0) continue;  // Fewer slots than top-k: nothing to give.
            policy->OnRemove(victim);
            resident[victim] = false;
            --used;
          }
          policy->OnInsert(id);
          resident[id] = true;
          ++used;
        }
        policy->OnUse(id);
      }
    }
  }
  return result;
}

}  // namespace waste::cache
