// Builds the memory plan's input from a Model: its chunks, and the KV cache
// and scratch a sequence of n_ctx positions needs (sized by the forward
// pass's own KvCache::Bytes and SequenceState::ScratchBytes, so the plan
// counts what the engine allocates).
#ifndef WASTE_DAEMON_MEMORY_MODEL_PLAN_H_
#define WASTE_DAEMON_MEMORY_MODEL_PLAN_H_

#include <cstdint>

#include "daemon/kernels/ops/attention.h"
#include "daemon/memory/plan.h"
#include "daemon/model/model.h"

namespace waste::memory {

// The returned input borrows model.chunks(): `model` must outlive it.
PlanInput PlanInputFor(const model::Model& model, int64_t n_ctx, kernels::ops::KvType kv_type);

}  // namespace waste::memory

#endif  // WASTE_DAEMON_MEMORY_MODEL_PLAN_H_
