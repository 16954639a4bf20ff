// What `wasted plan` and `wasted bench` share: opening a model, reading the
// budget flags (--ram-budget, --vram-budget, --vram-copy-slots, --ctx,
// --kv-type, --prefetch-depth, --sessions) and planning, with usable RAM
// detected for the default budget.
#ifndef WASTE_DAEMON_BENCH_MODEL_BUDGET_H_
#define WASTE_DAEMON_BENCH_MODEL_BUDGET_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cli_args.h"
#include "daemon/kernels/ops/attention.h"
#include "daemon/memory/plan.h"
#include "daemon/memory/usable_ram.h"
#include "daemon/model/model.h"
#include "storage/gguf.h"

namespace waste::bench {

struct PlannedModel {
  std::string path;
  std::unique_ptr<storage::GgufFile> gguf;
  std::unique_ptr<model::Model> model;
  memory::UsableRam usable;
  kernels::ops::KvType kv_type = kernels::ops::KvType::kF16;
  memory::PlanInput input;  // Borrows model->chunks().
  memory::PlanOptions options;
  uint64_t budget_bytes = 0;
  bool budget_defaulted = false;  // No --ram-budget: the recommendation.
  int sessions = 1;               // Concurrent sessions planned for.
};

// The process's peak resident set (VmHWM), in bytes.
int64_t PeakRssBytes();

// --sessions N[,N...]: each in 1..32 (default `default_sessions`).
absl::StatusOr<std::vector<int>> ParseSessions(const ParsedArgs& args, int default_sessions);

// Opens the model and resolves the budget; does not plan yet (a budget
// under the floor still lets `plan` print the sizes).
// The plan reserves KV caches for the largest --sessions value.
absl::StatusOr<PlannedModel> OpenAndBudget(const std::string& path, const ParsedArgs& args,
                                           int64_t default_ctx, int default_sessions = 1);

// The budget flags, for ParseArgs.
void AddBudgetFlags(std::vector<FlagDef>* flags);

}  // namespace waste::bench

#endif  // WASTE_DAEMON_BENCH_MODEL_BUDGET_H_
