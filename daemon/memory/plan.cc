#include "daemon/memory/plan.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/format.h"
#include "common/status_macros.h"
#include "daemon/memory/plan_internal.h"
#include "daemon/memory/vram_placement.h"

namespace waste::memory {
namespace {

using internal::Bytes;
using internal::kLargeTrunkSlots;
using internal::MinTrunkStreamingSlots;

uint64_t ReadBytes(const ChunkSpec& chunk) {
  uint64_t bytes = 0;
  for (const ChunkRead& read : chunk.reads) bytes += read.length;
  return bytes;
}

// Layers in pinning preference: 0, L-1, 1, L-2, ...
std::vector<int> LayerPreference(int n_layers) {
  std::vector<int> order;
  for (int lo = 0, hi = n_layers - 1; lo <= hi; ++lo, --hi) {
    order.push_back(lo);
    if (hi != lo) order.push_back(hi);
  }
  return order;
}

// What the streamed-trunk floor reserves for slots: the expert-sized ones
// and, when some trunk chunk is larger than an expert, the large ones.
uint64_t StreamedTrunkSlotBytes(const PlanSizes& s) {
  const uint64_t small = MinTrunkStreamingSlots(s.experts_per_token) * s.expert_slot_bytes;
  if (s.largest_trunk_slot <= s.expert_slot_bytes) return small;
  return small + kLargeTrunkSlots * s.largest_trunk_slot;
}

// MoE sizes: the trunk is everything but the routed experts.
void ComputeMoeSizes(const PlanInput& input, const PlanOptions& options, PlanSizes* s) {
  s->moe = true;
  s->experts_per_token = input.experts_per_token;
  std::map<int, int> experts_by_layer;
  uint64_t expert_read_bytes = 0;
  for (const ChunkSpec& chunk : input.chunks) {
    if (chunk.kind == ChunkKind::kEmbeddings) continue;  // Not trunk: read by rows.
    if (chunk.kind == ChunkKind::kExpert) {
      s->expert_bytes += chunk.slot_bytes;
      s->expert_slot_bytes = std::max(s->expert_slot_bytes, chunk.slot_bytes);
      expert_read_bytes += ReadBytes(chunk);
      ++s->n_experts;
      ++experts_by_layer[chunk.layer];
    } else {
      s->trunk_bytes += chunk.slot_bytes;
    }
  }
  s->moe_layers = static_cast<int>(experts_by_layer.size());
  const uint64_t k = static_cast<uint64_t>(std::max(0, input.experts_per_token));
  s->expert_working_set_bytes = k * s->moe_layers * s->expert_slot_bytes;
  s->active_expert_read_bytes =
      s->n_experts > 0 ? k * s->moe_layers * (expert_read_bytes / s->n_experts) : 0;
  for (const ChunkSpec& chunk : input.chunks) {
    if (chunk.layer >= 0 && chunk.kind != ChunkKind::kExpert) {
      s->largest_trunk_slot = std::max(s->largest_trunk_slot, chunk.slot_bytes);
    }
  }
  s->largest_streamed_slot = s->expert_slot_bytes;
  const uint64_t fixed = s->kv_bytes + s->scratch_bytes + s->runtime_bytes;
  s->trunk_floor_bytes = s->trunk_bytes + fixed + 2 * k * s->expert_slot_bytes;
  // With the trunk streamed: the global chunk pinned, and slots for what a
  // step holds at once (a layer's FFN trunk with one of its experts or the
  // next layer's trunk) and reads ahead (top-k experts).
  const uint64_t streamed_floor = s->global_bytes + fixed + StreamedTrunkSlotBytes(*s);
  s->floor_bytes = std::min({s->weight_bytes + fixed, s->trunk_floor_bytes, streamed_floor});
  s->recommended_bytes = s->all_resident_bytes;
  if (s->usable_bytes && s->all_resident_bytes > *s->usable_bytes) {
    // The trunk plus as many whole token working sets as usable RAM less a
    // reserve holds: a fraction of a working set buys a fraction of a
    // token's misses, the whole one is the unit people can reason about.
    const uint64_t usable = *s->usable_bytes;
    const uint64_t reserve = std::max(options.system_reserve_bytes, usable / 10);
    const uint64_t base = s->trunk_bytes + fixed + (s->max_sessions - 1) * s->kv_bytes;
    const uint64_t room = usable > reserve + base ? usable - reserve - base : 0;
    const uint64_t sets = s->expert_working_set_bytes > 0 ? room / s->expert_working_set_bytes : 0;
    s->recommended_bytes = std::max(s->floor_bytes, base + sets * s->expert_working_set_bytes);
    s->recommended_capped = true;
  }
}

// An embedding table left on disk costs each token one row's read.
void AddEmbeddingRowReads(const PlanInput& input, MemoryPlan* plan) {
  for (const ChunkSpec& chunk : input.chunks) {
    if (chunk.kind == ChunkKind::kEmbeddings && !plan->is_pinned[chunk.id]) {
      plan->read_bytes_per_token += chunk.row_bytes;
      plan->embeddings_on_disk = true;
    }
  }
}

bool HasExperts(const PlanInput& input) {
  for (const ChunkSpec& chunk : input.chunks) {
    if (chunk.kind == ChunkKind::kExpert) return true;
  }
  return false;
}

// Marks whole layers pinned in plan->pinned_layers.
void CountPinnedLayers(const PlanInput& input, MemoryPlan* plan) {
  for (const ChunkSpec& chunk : input.chunks) {
    plan->n_layers = std::max(plan->n_layers, chunk.layer + 1);
  }
  std::vector<bool> whole(plan->n_layers, true);
  for (const ChunkSpec& chunk : input.chunks) {
    if (chunk.layer >= 0 && !plan->is_pinned[chunk.id]) whole[chunk.layer] = false;
  }
  plan->pinned_layers = 0;
  for (bool w : whole) plan->pinned_layers += w ? 1 : 0;
}

// A MoE budget below the trunk (global chunk already pinned, `room` the
// budget less KV, scratch and runtime): slots for the least a step needs
// first, then trunk layers pinned in preference order (0, L-1, 1, ...,
// single chunks filling what whole layers leave), the rest of the room more
// slots. Every other trunk chunk streams with the experts, in access order
// so the store reads the next ones ahead; a token reads them all plus its
// experts (none assumed cached: the slots are fewer than the trunk's
// chunks, and LFU keeps the trunk, used every token, over experts).
void PlanStreamedTrunk(const PlanInput& input, const PlanOptions& options, uint64_t room,
                       MemoryPlan* plan) {
  const PlanSizes& s = plan->sizes;
  plan->trunk_streamed = true;
  std::map<int, std::vector<ChunkId>> layer_trunk;
  for (const ChunkSpec& chunk : input.chunks) {
    if (chunk.layer >= 0 && chunk.kind != ChunkKind::kExpert) {
      layer_trunk[chunk.layer].push_back(chunk.id);
    }
  }
  uint64_t left = room - s.global_bytes - StreamedTrunkSlotBytes(s);  // >= 0 at the floor.
  int n_layers = layer_trunk.empty() ? 0 : layer_trunk.rbegin()->first + 1;
  const std::vector<int> preference = LayerPreference(n_layers);
  auto try_pin = [&](ChunkId id) {
    if (plan->is_pinned[id] || input.chunks[id].slot_bytes > left) return;
    left -= input.chunks[id].slot_bytes;
    plan->is_pinned[id] = true;
    plan->pinned.push_back(id);
    plan->pinned_bytes += input.chunks[id].slot_bytes;
  };
  for (int layer : preference) {
    uint64_t bytes = 0;
    for (ChunkId id : layer_trunk[layer]) bytes += input.chunks[id].slot_bytes;
    if (bytes <= left) {
      for (ChunkId id : layer_trunk[layer]) try_pin(id);
    }
  }
  for (int layer : preference) {
    for (ChunkId id : layer_trunk[layer]) try_pin(id);
  }
  // Streamed trunk chunks larger than an expert get kLargeTrunkSlots slots
  // of the largest one's size; the rest of the room is expert-sized slots
  // (which the smaller trunk chunks share with the experts).
  uint64_t large = 0;
  uint64_t trunk_reads = 0;
  for (auto& [layer, ids] : layer_trunk) {
    for (ChunkId id : ids) {
      if (plan->is_pinned[id]) continue;
      if (input.chunks[id].slot_bytes > s.expert_slot_bytes) {
        large = std::max(large, input.chunks[id].slot_bytes);
      }
      plan->access_order.push_back(id);
      trunk_reads += ReadBytes(input.chunks[id]);
    }
  }
  plan->large_slots = large > 0 ? kLargeTrunkSlots : 0;
  plan->large_slot_bytes = large;
  const uint64_t small =
      (room - plan->pinned_bytes - plan->large_slots * large) / s.expert_slot_bytes;
  plan->streaming_slots = static_cast<int>(small) + plan->large_slots;
  plan->slot_bytes = s.expert_slot_bytes;
  plan->streaming_bytes = small * s.expert_slot_bytes + plan->large_slots * large;
  plan->streamed_trunk_chunks = static_cast<int>(plan->access_order.size());
  plan->streamed_chunks = s.n_experts + plan->streamed_trunk_chunks;
  plan->expert_cache_fraction = 0;
  plan->read_bytes_per_token = trunk_reads + s.active_expert_read_bytes;
  CountPinnedLayers(input, plan);
  // Two chunks in use; the rest may be read ahead.
  plan->prefetch_depth = std::min(std::max(options.prefetch_depth, 2 * s.experts_per_token),
                                  std::max(0, plan->streaming_slots - 2));
  plan->unused_bytes = room - plan->pool_bytes();
}

// The MoE plan of the file comment in plan.h; `plan->sizes` is computed and
// the budget is at least the floor.
void PlanMoe(const PlanInput& input, const PlanOptions& options, MemoryPlan* plan) {
  const PlanSizes& s = plan->sizes;
  const size_t n = input.chunks.size();
  plan->is_pinned.assign(n, false);
  auto pin = [&](ChunkId id) {
    plan->is_pinned[id] = true;
    plan->pinned.push_back(id);
    plan->pinned_bytes += input.chunks[id].slot_bytes;
  };
  const uint64_t fixed = plan->kv_total_bytes() + s.scratch_bytes + s.runtime_bytes;
  const uint64_t room = plan->budget_bytes - fixed;
  // Global first, then the trunk layer by layer, then (all fit) experts.
  for (size_t i = 0; i < n; ++i) {
    if (input.chunks[i].kind == ChunkKind::kGlobal) pin(static_cast<ChunkId>(i));
  }
  if (s.weight_bytes > room &&
      room < s.trunk_bytes + 2 * s.experts_per_token * s.expert_slot_bytes) {
    PlanStreamedTrunk(input, options, room, plan);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    if (input.chunks[i].layer >= 0 && input.chunks[i].kind != ChunkKind::kExpert) {
      pin(static_cast<ChunkId>(i));
    }
  }
  if (s.weight_bytes <= room) {
    for (size_t i = 0; i < n; ++i) {
      const ChunkKind kind = input.chunks[i].kind;
      if (kind == ChunkKind::kExpert || kind == ChunkKind::kEmbeddings) {
        pin(static_cast<ChunkId>(i));
      }
    }
    plan->expert_cache_fraction = 1;
  } else {
    const uint64_t slots = std::min<uint64_t>((room - s.trunk_bytes) / s.expert_slot_bytes,
                                              static_cast<uint64_t>(s.n_experts));
    plan->streaming_slots = static_cast<int>(slots);
    plan->slot_bytes = s.expert_slot_bytes;
    plan->streaming_bytes = slots * s.expert_slot_bytes;
    plan->streamed_chunks = s.n_experts;
    plan->expert_cache_fraction = static_cast<double>(slots) / s.n_experts;
    plan->read_bytes_per_token = static_cast<uint64_t>(
        (1 - plan->expert_cache_fraction) * static_cast<double>(s.active_expert_read_bytes));
  }
  CountPinnedLayers(input, plan);
  // One layer's experts being read while the previous layer's compute, and
  // with router lookahead the next layer's guesses too: 2 x top-k, not the
  // dense default of 2 chunks.
  plan->prefetch_depth = std::min(std::max(options.prefetch_depth, 2 * s.experts_per_token),
                                  std::max(0, plan->streaming_slots - 1));
  plan->unused_bytes = plan->budget_bytes - fixed - plan->pool_bytes();
}

// Sessions beyond the floor's one, as many as asked for and the budget
// above the floor holds: they come before pinning, since a session that
// cannot run waits, while a chunk that is not pinned is only read again.
// Under the floor nothing is reserved (the plan is refused anyway).
void ReserveSessions(MemoryPlan* plan) {
  const PlanSizes& s = plan->sizes;
  const uint64_t above =
      plan->budget_bytes > s.floor_bytes ? plan->budget_bytes - s.floor_bytes : 0;
  const uint64_t more = s.kv_bytes > 0 ? above / s.kv_bytes : uint64_t{1} << 20;
  plan->sessions_that_fit = static_cast<int>(std::min<uint64_t>(1 + more, 1 << 20));
  plan->sessions = std::min(s.max_sessions, plan->sessions_that_fit);
}

PlanSizes TwoTierSizes(const PlanInput& input, const PlanOptions& options,
                       std::optional<uint64_t> usable_bytes, const std::string& usable_source) {
  PlanSizes s;
  for (const ChunkSpec& chunk : input.chunks) {
    s.weight_bytes += chunk.slot_bytes;
    if (chunk.kind == ChunkKind::kGlobal) {
      s.global_bytes += chunk.slot_bytes;
    } else if (chunk.kind == ChunkKind::kEmbeddings) {
      s.embedding_bytes += chunk.slot_bytes;
      s.embedding_row_bytes += chunk.row_bytes;
    } else {
      s.largest_streamed_slot = std::max(s.largest_streamed_slot, chunk.slot_bytes);
    }
  }
  s.kv_bytes = input.kv_bytes;
  s.scratch_bytes = input.scratch_bytes;
  s.runtime_bytes = options.runtime_bytes;
  s.max_sessions = std::max(1, input.max_sessions);
  const uint64_t fixed = s.kv_bytes + s.scratch_bytes + s.runtime_bytes;
  s.all_resident_bytes = s.weight_bytes + fixed + (s.max_sessions - 1) * s.kv_bytes;
  s.floor_bytes =
      std::min(s.weight_bytes + fixed, s.global_bytes + fixed + 2 * s.largest_streamed_slot);
  s.recommended_bytes = s.all_resident_bytes;
  s.usable_bytes = usable_bytes;
  s.usable_source = usable_source;
  if (usable_bytes && s.all_resident_bytes > *usable_bytes) {
    uint64_t reserve = std::max(options.system_reserve_bytes, *usable_bytes / 10);
    s.recommended_bytes =
        std::max(s.floor_bytes, *usable_bytes > reserve ? *usable_bytes - reserve : 0);
    s.recommended_capped = true;
  }
  if (HasExperts(input)) ComputeMoeSizes(input, options, &s);
  return s;
}

// The RAM plan of the file comment in plan.h (the whole plan without a VRAM
// tier). `input` may have no chunks when all of them are in VRAM.
absl::StatusOr<MemoryPlan> PlanTwoTiers(const PlanInput& input, uint64_t budget_bytes,
                                        const PlanOptions& options,
                                        std::optional<uint64_t> usable_bytes,
                                        const std::string& usable_source) {
  MemoryPlan plan;
  plan.sizes = TwoTierSizes(input, options, usable_bytes, usable_source);
  plan.budget_bytes = budget_bytes;
  plan.n_ctx = input.n_ctx;
  const PlanSizes& s = plan.sizes;
  const size_t n = input.chunks.size();
  std::map<int, std::vector<ChunkId>> layer_chunks;
  std::vector<ChunkId> embeddings;
  for (size_t i = 0; i < n; ++i) {
    const ChunkSpec& chunk = input.chunks[i];
    if (chunk.id != static_cast<ChunkId>(i)) {
      return absl::InvalidArgumentError(
          absl::StrCat("chunk ", chunk.name, " has id ", chunk.id, " at index ", i));
    }
    if (chunk.kind == ChunkKind::kEmbeddings) {
      embeddings.push_back(chunk.id);
    } else if (chunk.kind != ChunkKind::kGlobal) {
      if (chunk.layer < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("chunk ", chunk.name, " is not global and has no layer"));
      }
      layer_chunks[chunk.layer].push_back(chunk.id);
      plan.access_order.push_back(chunk.id);
    }
  }
  plan.n_layers = static_cast<int>(layer_chunks.empty() ? 0 : layer_chunks.rbegin()->first + 1);
  ReserveSessions(&plan);

  if (s.moe) {
    if (input.experts_per_token <= 0) {
      return absl::InvalidArgumentError(
          "the model has routed-expert chunks but the plan input says no experts per token "
          "(PlanInput::experts_per_token; PlanInputFor sets it from the model)");
    }
    if (budget_bytes < s.floor_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "a RAM budget of ", Bytes(budget_bytes), " (", budget_bytes,
          " bytes) is under this mixture-of-experts model's floor of ", Bytes(s.floor_bytes), " (",
          s.floor_bytes, " bytes: the pinned output head (and tied embeddings) ",
          Bytes(s.global_bytes), " + KV cache for ", input.n_ctx, " tokens ", Bytes(s.kv_bytes),
          " + scratch ", Bytes(s.scratch_bytes), " + runtime ", Bytes(s.runtime_bytes),
          " + streaming slots ", Bytes(StreamedTrunkSlotBytes(s)),
          " for the streamed trunk and experts; with the whole trunk (attention, routers, "
          "shared experts) of ",
          Bytes(s.trunk_bytes), " pinned it takes ", Bytes(s.trunk_floor_bytes),
          "); raise --ram-budget to at least ", Bytes(s.floor_bytes),
          " or lower --ctx; `wasted plan MODEL --ram-budget SIZE` shows "
          "the whole plan"));
    }
    plan.access_order.clear();
    PlanMoe(input, options, &plan);
    AddEmbeddingRowReads(input, &plan);
    return plan;
  }

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
  const uint64_t fixed = plan.kv_total_bytes() + s.scratch_bytes + s.runtime_bytes;
  const uint64_t room = budget_bytes - fixed;  // >= floor - fixed, so no underflow.

  for (size_t i = 0; i < n; ++i) {
    if (input.chunks[i].kind == ChunkKind::kGlobal) pin(static_cast<ChunkId>(i));
  }
  if (s.weight_bytes <= room) {
    for (auto& [layer, ids] : layer_chunks) {
      for (ChunkId id : ids) pin(id);
    }
    for (ChunkId id : embeddings) pin(id);
  } else {
    // Slots first (they make streaming work at all), then pin with the rest.
    // (No layer chunk at all, when they are all in VRAM: no slots, and only
    // the embedding table can stay out.)
    uint64_t slot = s.largest_streamed_slot;
    uint64_t after_global = room - s.global_bytes;
    int slots = slot == 0 ? 0
                          : std::max(2, static_cast<int>(std::min<uint64_t>(
                                            options.prefetch_depth + 1, after_global / slot)));
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
    // The embedding table last: pinning it saves a token one row's read.
    if (slots == 0) {
      for (ChunkId id : embeddings) try_pin(id);
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
  AddEmbeddingRowReads(input, &plan);
  return plan;
}

// Tier bytes of a finished plan (in_vram and the RAM plan's fields set).
void CountTiers(const PlanInput& input, MemoryPlan* plan) {
  TierBytes& resident = plan->resident;
  TierBytes& token = plan->token;
  resident.vram = plan->vram.weight_bytes;
  resident.ram = plan->pool_bytes();
  // Per MoE layer: its experts, those in VRAM, their read bytes.
  struct LayerExperts {
    int n = 0, in_vram = 0;
    uint64_t read_bytes = 0, vram_read_bytes = 0;
  };
  std::map<int, LayerExperts> experts;
  int ram_experts = 0;  // Routed experts not in VRAM.
  for (const ChunkSpec& chunk : input.chunks) {
    const bool vram = plan->in_vram[chunk.id];
    if (!vram && !plan->is_pinned[chunk.id]) resident.disk += chunk.slot_bytes;
    if (chunk.kind == ChunkKind::kExpert) {
      LayerExperts& e = experts[chunk.layer];
      ++e.n;
      e.read_bytes += ReadBytes(chunk);
      if (vram) ++e.in_vram, e.vram_read_bytes += ReadBytes(chunk);
      if (!vram) ++ram_experts;
      continue;
    }
    TierBytes& to = token;
    const uint64_t used = chunk.kind == ChunkKind::kEmbeddings ? chunk.row_bytes : ReadBytes(chunk);
    (vram ? to.vram : plan->is_pinned[chunk.id] ? to.ram : to.disk) += used;
  }
  // A token routes to k experts per MoE layer, uniformly: a VRAM expert with
  // probability in_vram / n; one not in VRAM is in RAM when pinned, or with
  // the cache's fraction of the experts not in VRAM.
  const double k = std::max(0, input.experts_per_token);
  const bool experts_pinned = plan->streaming_slots == 0;
  const double cached =
      experts_pinned ? 1.0
      : ram_experts > 0
          ? std::min(1.0,
                     static_cast<double>(plan->streaming_slots - plan->large_slots) / ram_experts)
          : 1.0;
  double vram_bytes = 0, ram_bytes = 0, disk_bytes = 0;
  for (const auto& [layer, e] : experts) {
    // k of n experts: k/n of the layer's bytes, split by where they live.
    const double share = k / e.n;
    vram_bytes += share * static_cast<double>(e.vram_read_bytes);
    const double rest = share * static_cast<double>(e.read_bytes - e.vram_read_bytes);
    ram_bytes += cached * rest;
    disk_bytes += (1 - cached) * rest;
  }
  token.vram += static_cast<uint64_t>(vram_bytes);
  token.ram += static_cast<uint64_t>(ram_bytes);
  if (plan->vram.enabled()) {
    token.disk += static_cast<uint64_t>(disk_bytes);
    plan->read_bytes_per_token = token.disk;
  } else {
    // Without a VRAM tier the RAM plan's own estimate stands, to the byte.
    token.disk = plan->read_bytes_per_token;
  }
}

// The plan with a VRAM tier: the chunks not in VRAM are planned in RAM as a
// model of their own (ids renumbered), and the result mapped back.
absl::StatusOr<MemoryPlan> PlanThreeTiers(const PlanInput& input, uint64_t budget_bytes,
                                          const PlanOptions& options,
                                          std::optional<uint64_t> usable_bytes,
                                          const std::string& usable_source) {
  VramPlan vram = PlaceInVram(input, options);
  if (options.vram_budget_bytes < input.vram_scratch_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("a VRAM budget of ", Bytes(options.vram_budget_bytes),
                     " is under the device's step activations of ", Bytes(input.vram_scratch_bytes),
                     "; raise --vram-budget, or leave it unset (0) to run on the CPU"));
  }
  const size_t n = input.chunks.size();
  std::vector<bool> in_vram(n, false);
  for (ChunkId id : vram.chunks) in_vram[id] = true;
  std::vector<ChunkSpec> rest;
  std::vector<ChunkId> original;  // By the rest's id.
  for (size_t i = 0; i < n; ++i) {
    if (in_vram[i]) continue;
    ChunkSpec chunk = input.chunks[i];
    chunk.id = static_cast<ChunkId>(rest.size());
    original.push_back(static_cast<ChunkId>(i));
    rest.push_back(std::move(chunk));
  }
  PlanInput ram_input = input;
  ram_input.chunks = rest;
  PlanOptions ram_options = options;
  ram_options.vram_budget_bytes = 0;
  ASSIGN_OR_RETURN(MemoryPlan plan,
                   PlanTwoTiers(ram_input, budget_bytes, ram_options, usable_bytes, usable_source));
  // Back to the model's ids.
  for (ChunkId& id : plan.pinned) id = original[id];
  for (ChunkId& id : plan.access_order) id = original[id];
  std::vector<bool> is_pinned(n, false);
  for (ChunkId id : plan.pinned) is_pinned[id] = true;
  plan.is_pinned = std::move(is_pinned);
  plan.in_vram = std::move(in_vram);
  plan.vram = std::move(vram);
  // Layers counted over the whole model: pinned_layers are those with every
  // chunk pinned in RAM.
  std::map<int, bool> whole;
  plan.n_layers = 0;
  for (const ChunkSpec& chunk : input.chunks) {
    if (chunk.layer < 0) continue;
    plan.n_layers = std::max(plan.n_layers, chunk.layer + 1);
    auto [it, added] = whole.emplace(chunk.layer, true);
    it->second = it->second && plan.is_pinned[chunk.id];
  }
  plan.pinned_layers = 0;
  for (const auto& [layer, all] : whole) plan.pinned_layers += all ? 1 : 0;
  return plan;
}

}  // namespace

PlanSizes ComputePlanSizes(const PlanInput& input, const PlanOptions& options,
                           std::optional<uint64_t> usable_bytes, const std::string& usable_source) {
  if (options.vram_budget_bytes == 0) {
    return TwoTierSizes(input, options, usable_bytes, usable_source);
  }
  const VramPlan vram = PlaceInVram(input, options);
  std::vector<bool> in_vram(input.chunks.size(), false);
  for (ChunkId id : vram.chunks) in_vram[id] = true;
  std::vector<ChunkSpec> rest;
  for (size_t i = 0; i < input.chunks.size(); ++i) {
    if (!in_vram[i]) rest.push_back(input.chunks[i]);
  }
  PlanInput ram_input = input;
  ram_input.chunks = rest;
  return TwoTierSizes(ram_input, options, usable_bytes, usable_source);
}

namespace {

absl::StatusOr<MemoryPlan> PlanForScratch(const PlanInput& input, uint64_t budget_bytes,
                                          const PlanOptions& options,
                                          std::optional<uint64_t> usable_bytes,
                                          const std::string& usable_source) {
  if (input.chunks.empty()) return absl::InvalidArgumentError("the model has no weight chunks");
  MemoryPlan plan;
  if (options.vram_budget_bytes == 0) {
    ASSIGN_OR_RETURN(plan, PlanTwoTiers(input, budget_bytes, options, usable_bytes, usable_source));
    plan.in_vram.assign(input.chunks.size(), false);
  } else {
    for (size_t i = 0; i < input.chunks.size(); ++i) {
      if (input.chunks[i].id != static_cast<ChunkId>(i)) {
        return absl::InvalidArgumentError(absl::StrCat("chunk ", input.chunks[i].name, " has id ",
                                                       input.chunks[i].id, " at index ", i));
      }
    }
    ASSIGN_OR_RETURN(plan,
                     PlanThreeTiers(input, budget_bytes, options, usable_bytes, usable_source));
  }
  CountTiers(input, &plan);
  return plan;
}

}  // namespace

absl::StatusOr<MemoryPlan> PlanMemory(const PlanInput& input, uint64_t budget_bytes,
                                      const PlanOptions& options,
                                      std::optional<uint64_t> usable_bytes,
                                      const std::string& usable_source) {
  ASSIGN_OR_RETURN(MemoryPlan plan,
                   PlanForScratch(input, budget_bytes, options, usable_bytes, usable_source));
  plan.step_tokens = input.step_tokens;
  if (plan.all_resident()) return plan;
  // Weights stream: larger steps for prompts, their extra scratch taken
  // from the weights' share of the budget (a sixteenth at most, so decode
  // loses little of its cache), never from the sessions the budget holds.
  for (const PlanInput::StepSize& step : input.streaming_steps) {
    if (step.tokens <= input.step_tokens || step.scratch_bytes < input.scratch_bytes ||
        16 * (step.scratch_bytes - input.scratch_bytes) > budget_bytes) {
      continue;
    }
    PlanInput larger = input;
    larger.scratch_bytes = step.scratch_bytes;
    absl::StatusOr<MemoryPlan> streamed =
        PlanForScratch(larger, budget_bytes, options, usable_bytes, usable_source);
    if (!streamed.ok() || streamed->all_resident() || streamed->sessions < plan.sessions) continue;
    streamed->step_tokens = step.tokens;
    return streamed;
  }
  return plan;
}

}  // namespace waste::memory
