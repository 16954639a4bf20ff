#include "daemon/memory/model_plan.h"

#include "daemon/model/forward.h"

namespace waste::memory {

PlanInput PlanInputFor(const model::Model& model, int64_t n_ctx, kernels::ops::KvType kv_type) {
  PlanInput input;
  input.chunks = model.chunks();
  input.n_ctx = n_ctx;
  input.experts_per_token = static_cast<int>(model.hparams().moe.n_expert_used);
  input.kv_bytes = model::KvCache::Bytes(model.hparams(), n_ctx, kv_type);
  // Logits of one token besides the sequence's scratch.
  input.scratch_bytes =
      model::SequenceState::ScratchBytes(model) + model.hparams().n_vocab * sizeof(float);
  return input;
}

}  // namespace waste::memory
