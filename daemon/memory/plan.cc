#include "daemon/memory/plan.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "client/format.h"

namespace waste::memory {
namespace {

using cache::ChunkId;
using cache::ChunkKind;
using cache::ChunkSpec;

uint64_t ReadBytes(const ChunkSpec& chunk) {
  uint64_t bytes = 0;
  for (const cache::ChunkRead& read : chunk.reads) bytes += read.length;
  return bytes;
}

std::string Bytes(uint64_t bytes) { return FormatBytes(static_cast<int64_t>(bytes)); }

// Layers in pinning preference: 0, L-1, 1, L-2, ...
std::vector<int> LayerPreference(int n_layers) {
  std::vector<int> order;
  for (int lo = 0, hi = n_layers - 1; lo <= hi; ++lo, --hi) {
    order.push_back(lo);
    if (hi != lo) order.push_back(hi);
  }
  return order;
}

}  // namespace

PlanSizes ComputePlanSizes(const PlanInput& input, const PlanOptions& options,
                           std::optional<uint64_t> usable_bytes, const std::string& usable_source) {
  PlanSizes s;
  for (const ChunkSpec& chunk : input.chunks) {
    s.weight_bytes += chunk.slot_bytes;
    if (chunk.kind == ChunkKind::kGlobal) {
      s.global_bytes += chunk.slot_bytes;
    } else {
      s.largest_streamed_slot = std::max(s.largest_streamed_slot, chunk.slot_bytes);
    }
  }
  s.kv_bytes = input.kv_bytes;
  s.scratch_bytes = input.scratch_bytes;
  s.runtime_bytes = options.runtime_bytes;
  const uint64_t fixed = s.kv_bytes + s.scratch_bytes + s.runtime_bytes;
  s.all_resident_bytes = s.weight_bytes + fixed;
  s.floor_bytes =
      std::min(s.all_resident_bytes, s.global_bytes + fixed + 2 * s.largest_streamed_slot);
  s.recommended_bytes = s.all_resident_bytes;
  s.usable_bytes = usable_bytes;
  s.usable_source = usable_source;
  if (usable_bytes && s.all_resident_bytes > *usable_bytes) {
    uint64_t reserve = std::max(options.system_reserve_bytes, *usable_bytes / 10);
    s.recommended_bytes =
        std::max(s.floor_bytes, *usable_bytes > reserve ? *usable_bytes - reserve : 0);
    s.recommended_capped = true;
  }
  return s;
}

absl::StatusOr<MemoryPlan> PlanMemory(const PlanInput& input, uint64_t budget_bytes,
                                      const PlanOptions& options,
                                      std::optional<uint64_t> usable_bytes,
                                      const std::string& usable_source) {
  if (input.chunks.empty()) return absl::InvalidArgumentError("the model has no weight chunks");
  MemoryPlan plan;
  plan.sizes = ComputePlanSizes(input, options, usable_bytes, usable_source);
  plan.budget_bytes = budget_bytes;
  plan.n_ctx = input.n_ctx;
  const PlanSizes& s = plan.sizes;
  const size_t n = input.chunks.size();
  std::map<int, std::vector<ChunkId>> layer_chunks;
  for (size_t i = 0; i < n; ++i) {
    const ChunkSpec& chunk = input.chunks[i];
    if (chunk.id != static_cast<ChunkId>(i)) {
      return absl::InvalidArgumentError(
          absl::StrCat("chunk ", chunk.name, " has id ", chunk.id, " at index ", i));
    }
    if (chunk.kind != ChunkKind::kGlobal) {
      if (chunk.layer < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("chunk ", chunk.name, " is not global and has no layer"));
      }
      layer_chunks[chunk.layer].push_back(chunk.id);
      plan.access_order.push_back(chunk.id);
    }
  }
  plan.n_layers = static_cast<int>(layer_chunks.empty() ? 0 : layer_chunks.rbegin()->first + 1);

  if (budget_bytes < s.floor_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a RAM budget of ", Bytes(budget_bytes), " (", budget_bytes,
        " bytes) is under this model's floor of ", Bytes(s.floor_bytes), " (", s.floor_bytes,
        " bytes: pinned global chunk ", Bytes(s.global_bytes), " + KV cache for ", input.n_ctx,
        " tokens ", Bytes(s.kv_bytes), " + scratch ", Bytes(s.scratch_bytes), " + runtime ",
        Bytes(s.runtime_bytes), " + 2 streaming slots of ", Bytes(s.largest_streamed_slot),
        "); raise --ram-budget to at least ", Bytes(s.floor_bytes),
        " or lower --ctx; `wasted plan MODEL --ram-budget SIZE` shows "
        "the whole plan"));
  }

  plan.is_pinned.assign(n, false);
  auto pin = [&](ChunkId id) {
    plan.is_pinned[id] = true;
    plan.pinned.push_back(id);
    plan.pinned_bytes += input.chunks[id].slot_bytes;
  };
  const uint64_t fixed = s.kv_bytes + s.scratch_bytes + s.runtime_bytes;
  const uint64_t room = budget_bytes - fixed;  // >= floor - fixed, so no underflow.

  for (size_t i = 0; i < n; ++i) {
    if (input.chunks[i].kind == ChunkKind::kGlobal) pin(static_cast<ChunkId>(i));
  }
  if (s.weight_bytes <= room) {
    for (auto& [layer, ids] : layer_chunks) {
      for (ChunkId id : ids) pin(id);
    }
  } else {
    // Slots first (they make streaming work at all), then pin with the rest.
    uint64_t slot = s.largest_streamed_slot;
    uint64_t after_global = room - s.global_bytes;
    int slots =
        static_cast<int>(std::min<uint64_t>(options.prefetch_depth + 1, after_global / slot));
    slots = std::max(slots, 2);
    uint64_t left = after_global - slots * slot;
    const std::vector<int> preference = LayerPreference(plan.n_layers);
    auto try_pin = [&](ChunkId id) {
      if (plan.is_pinned[id] || input.chunks[id].slot_bytes > left) return false;
      left -= input.chunks[id].slot_bytes;
      pin(id);
      return true;
    };
    while (true) {
      for (int layer : preference) {
        uint64_t layer_bytes = 0;
        bool any_unpinned = false;
        for (ChunkId id : layer_chunks[layer]) {
          if (!plan.is_pinned[id]) layer_bytes += input.chunks[id].slot_bytes, any_unpinned = true;
        }
        if (any_unpinned && layer_bytes <= left) {
          for (ChunkId id : layer_chunks[layer]) try_pin(id);
        }
      }
      for (int layer : preference) {
        for (ChunkId id : layer_chunks[layer]) try_pin(id);
      }
      // Slots need only hold the largest chunk still streamed; what that
      // frees may pin more.
      uint64_t largest = 0;
      for (ChunkId id : plan.access_order) {
        if (!plan.is_pinned[id]) largest = std::max(largest, input.chunks[id].slot_bytes);
      }
      if (largest == 0) {  // Pinned everything after all.
        left += slots * slot;
        slots = 0;
        slot = 0;
        break;
      }
      if (largest == slot) break;
      left += slots * (slot - largest);
      slot = largest;
    }
    plan.streaming_slots = slots;
    plan.slot_bytes = slot;
    plan.streaming_bytes = slots * slot;
  }
  for (auto& [layer, ids] : layer_chunks) {
    bool all = true;
    for (ChunkId id : ids) all = all && plan.is_pinned[id];
    plan.pinned_layers += all ? 1 : 0;
  }
  for (ChunkId id : plan.access_order) {
    if (!plan.is_pinned[id]) {
      plan.read_bytes_per_token += ReadBytes(input.chunks[id]);
      ++plan.streamed_chunks;
    }
  }
  plan.prefetch_depth = std::max(0, plan.streaming_slots - 1);
  plan.unused_bytes = budget_bytes - fixed - plan.pool_bytes();
  return plan;
}

std::string MemoryPlan::Explain() const {
  const PlanSizes& s = sizes;
  std::string out;
  absl::StrAppend(&out, "weights:      ", Bytes(s.weight_bytes), " in ", is_pinned.size(),
                  " chunks (global ", Bytes(s.global_bytes), ", largest layer chunk ",
                  Bytes(s.largest_streamed_slot), ")\n");
  absl::StrAppend(&out, "KV cache:     ", Bytes(s.kv_bytes), " for ", n_ctx, " tokens\n");
  absl::StrAppend(&out, "scratch:      ", Bytes(s.scratch_bytes), ", runtime ",
                  Bytes(s.runtime_bytes), "\n");
  absl::StrAppend(&out, "floor:        ", Bytes(s.floor_bytes),
                  " (global + KV + scratch + runtime + 2 streaming slots)\n");
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
  return out;
}

}  // namespace waste::memory
