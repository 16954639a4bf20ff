#include "daemon/model/model_plan.h"

#include "daemon/model/forward.h"

namespace waste::model {

memory::PlanInput PlanInputFor(const Model& model, int64_t n_ctx, kernels::ops::KvType kv_type,
                               int max_sessions) {
  memory::PlanInput input;
  input.max_sessions = max_sessions;
  input.chunks = model.chunks();
  input.n_ctx = n_ctx;
  input.experts_per_token = static_cast<int>(model.hparams().moe.n_expert_used);
  // A session holds its KV cache and the logits of its last token.
  input.kv_bytes =
      KvCache::Bytes(model.hparams(), n_ctx, kv_type) + model.hparams().n_vocab * sizeof(float);
  // One step's workspace serves every session of the batch.
  input.scratch_bytes = Forward::WorkspaceBytes(model);
  return input;
}

}  // namespace waste::model
