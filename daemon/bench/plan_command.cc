// `wasted plan`: the memory plan of a model for a RAM budget.
#include <iostream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/cli_args.h"
#include "common/format.h"
#include "daemon/bench/commands.h"
#include "daemon/bench/model_budget.h"
#include "daemon/engine/planning.h"

namespace waste::bench {
namespace {

constexpr char kPlanUsage[] = R"(usage: wasted plan MODEL [flags]

The memory plan of MODEL (a GGUF file) for a RAM budget: the floor (the least
that runs), the recommended size (everything resident, or usable RAM less a
reserve), and for the budget which chunks are pinned, how many streaming
slots the pool has and how many bytes each token reads from disk.

  --ram-budget SIZE     e.g. 8GiB, 512MiB (default: the recommended size)
  --vram-budget SIZE    GPU memory: a third tier above RAM for the trunk and
                        the hottest experts (default: none)
  --vram-copy-slots N   device buffers for chunks copied up per step (default
                        0: chunks not in VRAM compute on the CPU; planned only,
                        the forward pass does not copy chunks up yet)
  --ctx N               context length the KV cache is sized for (default 4096)
  --kv-type f16|f32     KV cache element type (default f16)
  --prefetch-depth D    chunks read ahead (default 2)
  --sessions N          concurrent sessions to hold KV caches for (the
                        daemon's max_concurrent_requests; default 4)
  --json                machine-readable output
)";

void WriteJson(const PlannedModel& pm, const memory::PlanSizes& s,
               const absl::StatusOr<memory::MemoryPlan>& plan) {
  nlohmann::ordered_json j;  // Keys in the order written.
  j["model"] = pm.path;
  j["usable_ram_bytes"] = pm.usable.bytes;
  j["usable_ram_source"] = pm.usable.source;
  j["ctx"] = pm.input.n_ctx;
  j["weight_bytes"] = s.weight_bytes;
  j["global_bytes"] = s.global_bytes;
  j["largest_streamed_chunk_bytes"] = s.largest_streamed_slot;
  j["kv_bytes"] = s.kv_bytes;
  j["scratch_bytes"] = s.scratch_bytes;
  j["runtime_bytes"] = s.runtime_bytes;
  j["floor_bytes"] = s.floor_bytes;
  j["recommended_bytes"] = s.recommended_bytes;
  j["recommended_capped"] = s.recommended_capped;
  j["budget_bytes"] = pm.budget_bytes;
  j["ok"] = plan.ok();
  if (!plan.ok()) {
    j["error"] = std::string(plan.status().message());
  } else {
    j["all_resident"] = plan->all_resident();
    j["pinned_bytes"] = plan->pinned_bytes;
    j["pinned_chunks"] = static_cast<int64_t>(plan->pinned.size());
    j["pinned_layers"] = plan->pinned_layers;
    j["layers"] = plan->n_layers;
    j["streaming_slots"] = plan->streaming_slots;
    j["slot_bytes"] = plan->slot_bytes;
    j["large_slots"] = plan->large_slots;
    j["large_slot_bytes"] = plan->large_slot_bytes;
    j["prefetch_depth"] = plan->prefetch_depth;
    j["read_bytes_per_token"] = plan->read_bytes_per_token;
    j["step_tokens"] = plan->step_tokens;
    j["step_scratch_bytes"] = plan->sizes.scratch_bytes;
    j["sessions"] = plan->sessions;
    j["sessions_that_fit"] = plan->sessions_that_fit;
    j["unused_bytes"] = plan->unused_bytes;
    if (plan->vram.enabled()) {
      j["vram_budget_bytes"] = plan->vram.budget_bytes;
      j["vram_weight_bytes"] = plan->vram.weight_bytes;
      j["vram_scratch_bytes"] = plan->vram.scratch_bytes;
      j["vram_chunks"] = static_cast<int64_t>(plan->vram.chunks.size());
      j["vram_eligible_chunks"] = plan->vram.eligible_chunks;
      j["vram_trunk_layers"] = plan->vram.trunk_layers;
      j["vram_experts"] = plan->vram.experts;
      j["vram_copy_slots"] = plan->vram.copy_slots;
      j["vram_unused_bytes"] = plan->vram.unused_bytes;
    }
    j["resident_bytes"] = {
        {"vram", plan->resident.vram}, {"ram", plan->resident.ram}, {"disk", plan->resident.disk}};
    j["bytes_per_token"] = {
        {"vram", plan->token.vram}, {"ram", plan->token.ram}, {"disk", plan->token.disk}};
  }
  // A path need not be UTF-8: replace bad bytes rather than throw.
  std::cout << j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
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
  absl::StatusOr<PlannedModel> pm =
      OpenAndBudget(parsed->positional()[0], *parsed, 4096, engine::kDefaultMaxConcurrentRequests);
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
