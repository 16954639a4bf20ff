// `wasted bench --sessions N[,N...]`: concurrent generations through the
// engine's scheduler, in process; see sessions_bench.cc.
#ifndef WASTE_DAEMON_BENCH_SESSIONS_BENCH_H_
#define WASTE_DAEMON_BENCH_SESSIONS_BENCH_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/cli_args.h"
#include "daemon/bench/model_budget.h"
#include "daemon/memory/plan.h"

namespace waste::bench {

// One round per entry of `sessions`: that many requests of ~`prompt`
// prompt tokens and `gen` generated tokens submitted at once to a model
// loaded as the daemon would (budget, context and KV type from `pm`, KV
// caches for pm.sessions). Reads --lookahead, --buffered and
// --prefill-chunk from `args`. Prints one table.
absl::Status BenchSessions(const PlannedModel& pm, const memory::MemoryPlan& plan,
                           const std::vector<int>& sessions, int64_t prompt, int64_t gen,
                           int threads, const ParsedArgs& args, double memory_gbps);

}  // namespace waste::bench

#endif  // WASTE_DAEMON_BENCH_SESSIONS_BENCH_H_
