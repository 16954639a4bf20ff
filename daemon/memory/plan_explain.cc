// MemoryPlan::Explain: the plan in words (`wasted plan`, the Plan RPC).
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/memory/plan.h"
#include "daemon/memory/plan_internal.h"

namespace waste::memory {

using internal::Bytes;
using internal::kLargeTrunkSlots;
using internal::MinTrunkStreamingSlots;

std::string MemoryPlan::Explain() const {
  std::string out;
  if (vram.enabled()) ExplainVram(&out);
  if (sizes.moe) {
    ExplainMoe(&out);
  } else {
    ExplainDense(&out);
  }
  if (embeddings_on_disk) {
    absl::StrAppend(&out, "  embeddings: ", Bytes(sizes.embedding_bytes),
                    " stay on disk (not in the budget): a token reads its row of ",
                    Bytes(sizes.embedding_row_bytes), "\n");
  }
  if (vram.enabled()) ExplainTiers(&out);
  return out;
}

void MemoryPlan::ExplainDense(std::string* out_ptr) const {
  const PlanSizes& s = sizes;
  std::string& out = *out_ptr;
  absl::StrAppend(&out, "weights:      ", Bytes(s.weight_bytes), " in ",
                  is_pinned.size() - vram.chunks.size(), " chunks (global ", Bytes(s.global_bytes),
                  ", largest layer chunk ", Bytes(s.largest_streamed_slot), ")\n");
  ExplainSessions(&out);
  absl::StrAppend(&out, "floor:        ", Bytes(s.floor_bytes),
                  " (global + one session's KV + scratch + runtime + 2 streaming slots)\n");
  absl::StrAppend(&out, "recommended:  ", Bytes(s.recommended_bytes));
  if (s.recommended_capped) {
    absl::StrAppend(&out, " (everything resident needs ", Bytes(s.all_resident_bytes),
                    ", more than the usable ", Bytes(*s.usable_bytes), " from ", s.usable_source,
                    "; this leaves a reserve and streams the rest)\n");
  } else {
    absl::StrAppend(&out, " (everything resident)\n");
  }
  if (s.usable_bytes && !s.recommended_capped) {
    absl::StrAppend(&out, "usable RAM:   ", Bytes(*s.usable_bytes), " from ", s.usable_source,
                    "\n");
  }
  absl::StrAppend(&out, "budget:       ", Bytes(budget_bytes), "\n");
  if (all_resident()) {
    absl::StrAppend(&out, "  everything resident: ", Bytes(pinned_bytes),
                    " pinned, nothing read per token\n");
  } else {
    absl::StrAppend(&out, "  pinned:     ", Bytes(pinned_bytes), " (global + ", pinned_layers,
                    " of ", n_layers, " whole layers, ", pinned.size(), " chunks)\n");
    absl::StrAppend(&out, "  streaming:  ", streaming_slots, " slots x ", Bytes(slot_bytes), " = ",
                    Bytes(streaming_bytes), ", prefetch depth ", prefetch_depth, "\n");
    absl::StrAppend(&out, "  per token:  ", Bytes(read_bytes_per_token), " read from disk (",
                    streamed_chunks,
                    " chunks): decode tok/s is at most the disk's bytes/s over this\n");
  }
  absl::StrAppend(&out, "  unused:     ", Bytes(unused_bytes), "\n");
}

void MemoryPlan::ExplainVram(std::string* out) const {
  absl::StrAppend(out, "VRAM budget:  ", Bytes(vram.budget_bytes), ": activations ",
                  Bytes(vram.scratch_bytes), ", weights ", Bytes(vram.weight_bytes), " in ",
                  vram.chunks.size(), " of ", vram.eligible_chunks, " chunks the device computes (",
                  vram.global ? "output head, " : "", vram.trunk_layers, " of ", n_layers,
                  " layers' ", sizes.moe || vram.experts > 0 ? "trunk" : "attention and FFN");
  if (vram.experts > 0) absl::StrAppend(out, ", ", vram.experts, " routed experts");
  absl::StrAppend(out, ")");
  if (vram.copy_slots > 0) {
    absl::StrAppend(out, ", ", vram.copy_slots, " copy slots x ", Bytes(vram.copy_slot_bytes),
                    " for chunks copied up per step");
  }
  absl::StrAppend(out, ", unused ", Bytes(vram.unused_bytes), "\n");
  absl::StrAppend(out, "RAM tier:     the weights not in VRAM, planned as follows\n");
}

void MemoryPlan::ExplainTiers(std::string* out) const {
  absl::StrAppend(out, "tiers:        resident VRAM ", Bytes(resident.vram), ", RAM ",
                  Bytes(resident.ram), " (pinned + slots), disk only ", Bytes(resident.disk), "\n");
  absl::StrAppend(out, "per token:    ", Bytes(token.total()), " of weights: VRAM ",
                  Bytes(token.vram), ", RAM ", Bytes(token.ram), ", disk ", Bytes(token.disk),
                  sizes.moe ? " (experts: uniform routing)" : "",
                  "; a token takes at least each tier's bytes over its bandwidth (HBM, RAM, "
                  "disk)\n");
}

void MemoryPlan::ExplainSessions(std::string* out) const {
  const PlanSizes& s = sizes;
  absl::StrAppend(out, "KV cache:     ", Bytes(s.kv_bytes), " per session for ", n_ctx,
                  " tokens\n");
  absl::StrAppend(out, "sessions:     ", sessions, " run together (KV ", Bytes(kv_total_bytes()),
                  "; max_concurrent_requests asks ", s.max_sessions, ", this budget holds ",
                  sessions_that_fit, " at this context)\n");
  absl::StrAppend(out, "scratch:      ", Bytes(s.scratch_bytes), " (one step of up to ",
                  step_tokens, " tokens), runtime ", Bytes(s.runtime_bytes), "\n");
}

void MemoryPlan::ExplainMoe(std::string* out) const {
  const PlanSizes& s = sizes;
  absl::StrAppend(out, "weights:      ", Bytes(s.weight_bytes), " in ",
                  is_pinned.size() - vram.chunks.size(), " chunks: trunk ", Bytes(s.trunk_bytes),
                  " (embeddings, output, attention, routers, shared experts), routed experts ",
                  Bytes(s.expert_bytes), " (", s.n_experts, " of ", Bytes(s.expert_slot_bytes),
                  " in ", s.moe_layers, " MoE layers)\n");
  absl::StrAppend(out, "per token:    top-", s.experts_per_token, " x ", s.moe_layers,
                  " layers = ", s.experts_per_token * s.moe_layers, " experts, a working set of ",
                  Bytes(s.expert_working_set_bytes), " (", Bytes(s.active_expert_read_bytes),
                  " to read when none is cached)\n");
  ExplainSessions(out);
  absl::StrAppend(out, "trunk floor:  ", Bytes(s.trunk_floor_bytes),
                  " (trunk + one session's KV + scratch + runtime + ", 2 * s.experts_per_token,
                  " expert slots: one layer's top-", s.experts_per_token,
                  " in use, the next one's being read)\n");
  absl::StrAppend(
      out, "floor:        ", Bytes(s.floor_bytes),
      s.floor_bytes < s.trunk_floor_bytes
          ? absl::StrCat(" (the trunk streamed too: the output head (and tied embeddings) pinned + "
                         "fixed + ",
                         MinTrunkStreamingSlots(s.experts_per_token), " expert slots of ",
                         Bytes(s.expert_slot_bytes),
                         s.largest_trunk_slot > s.expert_slot_bytes
                             ? absl::StrCat(" + ", kLargeTrunkSlots, " trunk slots of ",
                                            Bytes(s.largest_trunk_slot))
                             : std::string(),
                         ")\n")
          : std::string(" (the trunk floor)\n"));
  absl::StrAppend(out, "recommended:  ", Bytes(s.recommended_bytes));
  if (s.recommended_capped) {
    const uint64_t base =
        s.trunk_bytes + s.max_sessions * s.kv_bytes + s.scratch_bytes + s.runtime_bytes;
    const uint64_t sets = s.expert_working_set_bytes > 0 && s.recommended_bytes > base
                              ? (s.recommended_bytes - base) / s.expert_working_set_bytes
                              : 0;
    absl::StrAppend(out, " (trunk + fixed + ", sets, " token working sets of ",
                    Bytes(s.expert_working_set_bytes), "; everything resident needs ",
                    Bytes(s.all_resident_bytes), ", more than the usable ", Bytes(*s.usable_bytes),
                    " from ", s.usable_source, " less a reserve)\n");
  } else {
    absl::StrAppend(out, " (everything resident; each ", Bytes(s.expert_working_set_bytes),
                    " below that caches one token's working set less)\n");
  }
  absl::StrAppend(out, "budget:       ", Bytes(budget_bytes), "\n");
  if (all_resident()) {
    absl::StrAppend(out, "  everything resident: ", Bytes(pinned_bytes),
                    " pinned, nothing read per token\n");
  } else if (trunk_streamed) {
    absl::StrAppend(out, "  pinned:     ", Bytes(pinned_bytes), " (", pinned.size(),
                    " chunks: the output head (and tied embeddings), then trunk layers 0, L-1, 1, "
                    "... that fit)\n");
    absl::StrAppend(out, "  streaming:  ", streaming_slots - large_slots, " slots x ",
                    Bytes(slot_bytes));
    if (large_slots > 0) {
      absl::StrAppend(out, " + ", large_slots, " trunk slots x ", Bytes(large_slot_bytes));
    }
    absl::StrAppend(out, " = ", Bytes(streaming_bytes), " for ", streamed_trunk_chunks,
                    " trunk chunks and every expert, prefetch depth ", prefetch_depth, "\n");
    absl::StrAppend(out, "  per token:  ~", Bytes(read_bytes_per_token),
                    " read from disk: the streamed trunk and top-", s.experts_per_token,
                    " experts per layer, none assumed cached (the budget is under the trunk "
                    "floor); decode tok/s is at most the disk's bytes/s over this\n");
  } else {
    absl::StrAppend(out, "  pinned:     ", Bytes(pinned_bytes), " (the whole trunk, ",
                    pinned.size(), " chunks)\n");
    absl::StrAppend(out, "  experts:    ", streaming_slots, " slots x ", Bytes(slot_bytes), " = ",
                    Bytes(streaming_bytes), " cache ",
                    absl::StrFormat("%.1f%%", 100 * expert_cache_fraction), " of the experts (",
                    absl::StrFormat("%.2f", static_cast<double>(streaming_bytes) /
                                                std::max<uint64_t>(1, s.expert_working_set_bytes)),
                    " token working sets), prefetch depth ", prefetch_depth, "\n");
    absl::StrAppend(out, "  per token:  ~", Bytes(read_bytes_per_token),
                    " read from disk, assuming uniform routing: (1 - ",
                    absl::StrFormat("%.3f", expert_cache_fraction), ") x ",
                    Bytes(s.active_expert_read_bytes),
                    "; skewed real routing and a warm hotlist read less (measure with "
                    "`wasted bench`); decode tok/s is at most the disk's bytes/s over this\n");
  }
  absl::StrAppend(out, "  unused:     ", Bytes(unused_bytes), "\n");
}

}  // namespace waste::memory
