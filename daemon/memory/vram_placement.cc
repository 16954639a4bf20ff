#include "daemon/memory/vram_placement.h"

#include <algorithm>
#include <map>

namespace waste::memory {
namespace {

// Layers in preference order: 0, L-1, 1, L-2, ... (as the RAM pinning).
std::vector<int> Preference(int n_layers) {
  std::vector<int> order;
  for (int lo = 0, hi = n_layers - 1; lo <= hi; ++lo, --hi) {
    order.push_back(lo);
    if (hi != lo) order.push_back(hi);
  }
  return order;
}

}  // namespace

VramPlan PlaceInVram(const PlanInput& input, const PlanOptions& options) {
  VramPlan v;
  v.budget_bytes = options.vram_budget_bytes;
  if (v.budget_bytes == 0) return v;
  v.scratch_bytes = input.vram_scratch_bytes;
  const size_t n = input.chunks.size();
  // The embedding table is only ever read a row at a time, on the host.
  auto eligible = [&](size_t i) {
    if (input.chunks[i].kind == ChunkKind::kEmbeddings) return false;
    return input.vram_eligible.empty() ||
           (i < input.vram_eligible.size() && input.vram_eligible[i]);
  };
  std::vector<size_t> globals;
  std::map<int, std::vector<size_t>> trunk;  // Non-expert chunks by layer.
  std::vector<size_t> experts;               // In claim order.
  std::vector<bool> listed(n, false);
  int n_layers = 0;
  for (size_t i = 0; i < n; ++i) {
    const ChunkSpec& chunk = input.chunks[i];
    n_layers = std::max(n_layers, chunk.layer + 1);
    if (!eligible(i)) continue;
    ++v.eligible_chunks;
    if (chunk.kind == ChunkKind::kGlobal || chunk.layer < 0) {
      globals.push_back(i);
    } else if (chunk.kind != ChunkKind::kExpert) {
      trunk[chunk.layer].push_back(i);
    }
  }
  for (ChunkId id : input.expert_preference) {
    const size_t i = static_cast<size_t>(id);
    if (id < 0 || i >= n || listed[i] || !eligible(i)) continue;
    if (input.chunks[i].kind != ChunkKind::kExpert) continue;
    listed[i] = true;
    experts.push_back(i);
  }
  for (size_t i = 0; i < n; ++i) {
    if (!listed[i] && eligible(i) && input.chunks[i].kind == ChunkKind::kExpert) {
      experts.push_back(i);
    }
  }
  if (v.budget_bytes < v.scratch_bytes) return v;  // PlanMemory refuses it.
  const uint64_t room = v.budget_bytes - v.scratch_bytes;

  // Copy slots hold the largest chunk that is computed on the device but
  // not resident; at first any eligible layer chunk, shrunk below as
  // placement leaves only smaller ones out.
  std::vector<bool> placed(n, false);
  auto largest_out = [&] {
    uint64_t largest = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!placed[i] && eligible(i) && input.chunks[i].kind != ChunkKind::kGlobal) {
        largest = std::max(largest, input.chunks[i].slot_bytes);
      }
    }
    return largest;
  };
  int copy_slots = std::max(0, options.vram_copy_slots);
  uint64_t copy_slot = largest_out();
  if (copy_slot == 0 || copy_slots * copy_slot > room) copy_slots = 0;
  uint64_t left = room - copy_slots * copy_slot;
  auto try_place = [&](size_t i) {
    if (placed[i] || input.chunks[i].slot_bytes > left) return;
    left -= input.chunks[i].slot_bytes;
    placed[i] = true;
    v.chunks.push_back(static_cast<ChunkId>(i));
  };
  const std::vector<int> preference = Preference(n_layers);
  while (true) {
    for (size_t i : globals) try_place(i);
    for (int layer : preference) {  // Whole layers first.
      auto it = trunk.find(layer);
      if (it == trunk.end()) continue;
      uint64_t bytes = 0;
      for (size_t i : it->second) bytes += placed[i] ? 0 : input.chunks[i].slot_bytes;
      if (bytes > 0 && bytes <= left) {
        for (size_t i : it->second) try_place(i);
      }
    }
    for (int layer : preference) {  // Then single chunks.
      auto it = trunk.find(layer);
      if (it == trunk.end()) continue;
      for (size_t i : it->second) try_place(i);
    }
    for (size_t i : experts) try_place(i);
    if (copy_slots == 0) break;
    // What is placed only grows, so the largest chunk left out only shrinks.
    const uint64_t largest = largest_out();
    if (largest == copy_slot) break;
    left += copy_slots * copy_slot;
    if (largest == 0) {
      copy_slots = 0;
      copy_slot = 0;
    } else {
      copy_slot = largest;
      left -= copy_slots * copy_slot;
    }
  }
  v.copy_slots = copy_slots;
  v.copy_slot_bytes = copy_slots > 0 ? copy_slot : 0;
  std::map<int, bool> whole;  // Layers with trunk chunks: all placed?
  for (size_t i = 0; i < n; ++i) {
    const ChunkSpec& chunk = input.chunks[i];
    if (placed[i]) {
      v.weight_bytes += chunk.slot_bytes;
      if (chunk.kind == ChunkKind::kGlobal) v.global = true;
      if (chunk.kind == ChunkKind::kExpert) ++v.experts;
    }
    if (chunk.layer >= 0 && chunk.kind != ChunkKind::kExpert) {
      auto [it, added] = whole.emplace(chunk.layer, true);
      it->second = it->second && placed[i];
    }
  }
  for (const auto& [layer, all] : whole) v.trunk_layers += all ? 1 : 0;
  v.unused_bytes = v.budget_bytes - v.used_bytes();
  return v;
}

}  // namespace waste::memory
