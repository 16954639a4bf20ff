// Which chunks the VRAM tier of a memory plan holds (see plan.h's file
// comment): the device's step activations first, then copy slots when asked
// for, then the trunk (global chunk, whole layers first and last preferred,
// then single chunks), then routed experts in the caller's order. Only
// chunks the device can compute are placed.
//
// Thread-safety: a free function over plain values.
#ifndef WASTE_DAEMON_MEMORY_VRAM_PLACEMENT_H_
#define WASTE_DAEMON_MEMORY_VRAM_PLACEMENT_H_

#include "daemon/memory/plan.h"

namespace waste::memory {

// The VRAM tier for options.vram_budget_bytes (an empty VramPlan for 0).
// Chunks are indexed by position in input.chunks. A budget under
// input.vram_scratch_bytes places nothing (PlanMemory refuses it).
VramPlan PlaceInVram(const PlanInput& input, const PlanOptions& options);

}  // namespace waste::memory

#endif  // WASTE_DAEMON_MEMORY_VRAM_PLACEMENT_H_
