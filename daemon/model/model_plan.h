// Builds the memory plan's input from a Model: its chunks, the KV cache a
// session of n_ctx positions needs, and the step workspace of the model's
// Forward, counted once however many sessions share it (sized by the forward
// pass's own KvCache::Bytes and Forward::WorkspaceBytes, so the plan counts
// what the engine allocates).
//
// It lives in model/, not memory/: memory/ plans over chunk specs and byte
// counts alone and knows nothing of models or kernels.
#ifndef WASTE_DAEMON_MODEL_MODEL_PLAN_H_
#define WASTE_DAEMON_MODEL_MODEL_PLAN_H_

#include <cstdint>

#include "daemon/kernels/ops/attention.h"
#include "daemon/memory/plan.h"
#include "daemon/model/model.h"

namespace waste::model {

// The returned input borrows model.chunks(): `model` must outlive it.
// `max_sessions`: how many sessions should run together (PlanInput).
memory::PlanInput PlanInputFor(const Model& model, int64_t n_ctx, kernels::ops::KvType kv_type,
                               int max_sessions = 1);

}  // namespace waste::model

#endif  // WASTE_DAEMON_MODEL_MODEL_PLAN_H_
