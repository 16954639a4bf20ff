// policy_sim TRACE [TOKENS]: hit rate of the expert cache against its size
// (as a fraction of all routed experts) for LRU, LFU and LFU with ageing,
// replaying a recorded routing trace (`wasted bench --trace-out TRACE`) and
// Zipf-skewed synthetic traces of the same shape (TOKENS tokens, default
// 2000), the first 10% of tokens warming the cache.
//   bazel run -c opt //daemon/bench:policy_sim -- /tmp/trace.txt
#include <cstdio>
#include <cstdlib>

#include "daemon/cache/routing_trace.h"
#include "storage/env.h"

namespace waste::cache {
namespace {

void Table(const char* name, const RoutingTrace& trace) {
  std::printf("%s: %lld tokens, %d MoE layers x %d experts, top-%d\n", name,
              static_cast<long long>(trace.tokens()), trace.n_layers, trace.n_experts, trace.top_k);
  std::printf("  cache  |   lru   |   lfu   | lfu-aged\n");
  const int total = trace.n_layers * trace.n_experts;
  for (double fraction : {0.05, 0.1, 0.2, 0.3, 0.5, 0.75}) {
    const int slots = std::max(2 * trace.top_k, static_cast<int>(fraction * total));
    std::printf("  %5.0f%% |", 100 * fraction);
    for (PolicyKind kind : {PolicyKind::kLru, PolicyKind::kLfu, PolicyKind::kLfuAged}) {
      std::printf(" %6.1f%% |",
                  100 * ReplayTrace(trace, kind, slots, trace.tokens() / 10).hit_rate());
    }
    std::printf("\n");
  }
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: policy_sim TRACE [TOKENS]\n");
    return 2;
  }
  auto text = storage::ReadFileToString(storage::Env::Default(), argv[1]);
  if (!text.ok()) {
    std::fprintf(stderr, "%s\n", std::string(text.status().message()).c_str());
    return 1;
  }
  auto trace = ParseTrace(*text);
  if (!trace.ok()) {
    std::fprintf(stderr, "%s\n", std::string(trace.status().message()).c_str());
    return 1;
  }
  const int64_t tokens = argc > 2 ? std::atoll(argv[2]) : 2000;
  Table("recorded", *trace);
  for (double s : {0.0, 0.8, 1.2}) {
    char name[64];
    std::snprintf(name, sizeof(name), "zipf s=%.1f", s);
    Table(name, ZipfTrace(trace->n_layers, trace->n_experts, trace->top_k, tokens, s, 1));
  }
  return 0;
}

}  // namespace
}  // namespace waste::cache

int main(int argc, char** argv) { return waste::cache::Main(argc, argv); }
