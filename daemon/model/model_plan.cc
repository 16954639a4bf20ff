#include "daemon/model/model_plan.h"

#include "daemon/model/device_weights.h"
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
  input.step_tokens = kDefaultStepTokens;
  input.scratch_bytes = Forward::WorkspaceBytes(model, {.max_step_tokens = input.step_tokens});
  for (int64_t tokens = kStreamingStepTokens; tokens > input.step_tokens; tokens /= 2) {
    input.streaming_steps.push_back(
        {tokens, Forward::WorkspaceBytes(model, {.max_step_tokens = tokens})});
  }
  // The VRAM tier (read only when the plan has a VRAM budget).
  input.vram_eligible = DeviceWeights::Eligible(model);
  input.vram_scratch_bytes = DeviceWeights::ScratchBytes(model, kMaxProductRows);
  return input;
}

}  // namespace waste::model
