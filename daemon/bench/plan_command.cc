// `wasted plan`: the memory plan of a model for a RAM budget.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "common/cli_args.h"
#include "common/format.h"
#include "daemon/bench/commands.h"
#include "daemon/bench/model_budget.h"
#include "daemon/engine/planning.h"
#include "daemon/tools/json_writer.h"

namespace waste::bench {
namespace {

constexpr char kPlanUsage[] = R"(usage: wasted plan MODEL [flags]

The memory plan of MODEL (a GGUF file) for a RAM budget: the floor (the least
that runs), the recommended size (everything resident, or usable RAM less a
reserve), and for the budget which chunks are pinned, how many streaming
slots the pool has and how many bytes each token reads from disk.

  --ram-budget SIZE     e.g. 8GiB, 512MiB (default: the recommended size)
  --ctx N               context length the KV cache is sized for (default 4096)
  --kv-type f16|f32     KV cache element type (default f16)
  --prefetch-depth D    chunks read ahead (default 2)
  --sessions N          concurrent sessions to hold KV caches for (the
                        daemon's max_concurrent_requests; default 4)
  --json                machine-readable output
)";

void WriteJson(const PlannedModel& pm, const memory::PlanSizes& s,
               const absl::StatusOr<memory::MemoryPlan>& plan) {
  tools::JsonWriter j;
  j.BeginObject();
  j.Key("model");
  j.String(pm.path);
  j.Key("usable_ram_bytes");
  j.Uint(pm.usable.bytes);
  j.Key("usable_ram_source");
  j.String(pm.usable.source);
  j.Key("ctx");
  j.Int(pm.input.n_ctx);
  j.Key("weight_bytes");
  j.Uint(s.weight_bytes);
  j.Key("global_bytes");
  j.Uint(s.global_bytes);
  j.Key("largest_streamed_chunk_bytes");
  j.Uint(s.largest_streamed_slot);
  j.Key("kv_bytes");
  j.Uint(s.kv_bytes);
  j.Key("scratch_bytes");
  j.Uint(s.scratch_bytes);
  j.Key("runtime_bytes");
  j.Uint(s.runtime_bytes);
  j.Key("floor_bytes");
  j.Uint(s.floor_bytes);
  j.Key("recommended_bytes");
  j.Uint(s.recommended_bytes);
  j.Key("recommended_capped");
  j.Bool(s.recommended_capped);
  j.Key("budget_bytes");
  j.Uint(pm.budget_bytes);
  j.Key("ok");
  j.Bool(plan.ok());
  if (!plan.ok()) {
    j.Key("error");
    j.String(std::string(plan.status().message()));
  } else {
    j.Key("all_resident");
    j.Bool(plan->all_resident());
    j.Key("pinned_bytes");
    j.Uint(plan->pinned_bytes);
    j.Key("pinned_chunks");
    j.Int(static_cast<int64_t>(plan->pinned.size()));
    j.Key("pinned_layers");
    j.Int(plan->pinned_layers);
    j.Key("layers");
    j.Int(plan->n_layers);
    j.Key("streaming_slots");
    j.Int(plan->streaming_slots);
    j.Key("slot_bytes");
    j.Uint(plan->slot_bytes);
    j.Key("prefetch_depth");
    j.Int(plan->prefetch_depth);
    j.Key("read_bytes_per_token");
    j.Uint(plan->read_bytes_per_token);
    j.Key("sessions");
    j.Int(plan->sessions);
    j.Key("sessions_that_fit");
    j.Int(plan->sessions_that_fit);
    j.Key("unused_bytes");
    j.Uint(plan->unused_bytes);
  }
  j.EndObject();
  std::cout << j.str() << "\n";
}

}  // namespace

int RunPlan(const std::vector<std::string>& args) {
  std::vector<FlagDef> flags = {{"json", false}, {"help", false}};
  AddBudgetFlags(&flags);
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, flags);
  if (!parsed.ok()) {
    std::cerr << "wasted plan: " << parsed.status().message() << "\n\n" << kPlanUsage;
    return 2;
  }
  if (parsed->Has("help")) {
    std::cout << kPlanUsage;
    return 0;
  }
  if (parsed->positional().size() != 1) {
    std::cerr << "wasted plan: expected one MODEL path\n\n" << kPlanUsage;
    return 2;
  }
  absl::StatusOr<PlannedModel> pm = OpenAndBudget(parsed->positional()[0], *parsed, 4096,
                                                  engine::kDefaultMaxConcurrentRequests);
  if (!pm.ok()) {
    std::cerr << "wasted plan: " << pm.status().message() << "\n";
    return pm.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  memory::PlanSizes sizes =
      memory::ComputePlanSizes(pm->input, pm->options, pm->usable.bytes, pm->usable.source);
  absl::StatusOr<memory::MemoryPlan> plan = memory::PlanMemory(
      pm->input, pm->budget_bytes, pm->options, pm->usable.bytes, pm->usable.source);
  if (parsed->Has("json")) {
    WriteJson(*pm, sizes, plan);
    return plan.ok() ? 0 : 1;
  }
  std::cout << "model:        " << pm->path << "\n";
  if (!plan.ok()) {
    std::cout << "floor:        " << FormatBytes(sizes.floor_bytes)
              << "\nrecommended:  " << FormatBytes(sizes.recommended_bytes) << "\n";
    std::cerr << "wasted plan: " << plan.status().message() << "\n";
    return 1;
  }
  if (pm->budget_defaulted) std::cout << "(no --ram-budget: planning the recommended size)\n";
  std::cout << plan->Explain();
  return 0;
}

}  // namespace waste::bench
