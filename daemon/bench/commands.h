// `wasted plan` and `wasted bench`: the memory plan of a model for a RAM
// budget, and an in-process benchmark of prefill and decode under that
// budget (resident when everything fits, else streaming), quoted next to
// this machine's memory bandwidth measured in the same run. No RPC: both
// load the model themselves.
#ifndef WASTE_DAEMON_BENCH_COMMANDS_H_
#define WASTE_DAEMON_BENCH_COMMANDS_H_

#include <string>
#include <vector>

namespace waste::bench {

// `wasted plan MODEL [--ram-budget SIZE] [--ctx N] [--kv-type f16|f32]
// [--prefetch-depth D] [--json]`. Returns the exit code: 0, 1 when the
// budget is under the floor or the model cannot be read, 2 for bad flags.
int RunPlan(const std::vector<std::string>& args);

// `wasted bench MODEL [--ram-budget SIZE] [--ctx N] [--prompt-tokens N]
// [--gen-tokens N] [--threads N] [--policy lru|lfu] [--prefetch-depth D]
// [--io-engine auto|io_uring|threads] [--buffered] [--mem-bench-bytes SIZE]
// [--json]`. Returns the exit code.
int RunBench(const std::vector<std::string>& args);

}  // namespace waste::bench

#endif  // WASTE_DAEMON_BENCH_COMMANDS_H_
