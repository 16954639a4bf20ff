// Expert routing of mixture-of-experts layers, as llama.cpp's build_moe_ffn
// computes it:
//   probs     = softmax(logits) or sigmoid(logits)       (MoeParams::gating)
//   selection = probs + exp_probs_b                       (bias: choice only)
//   group-limited routing: groups ranked by the sum of their two best
//     selection scores; experts outside the n_group_used best are excluded
//   chosen    = the n_expert_used best selection scores
//   weights   = probs[chosen], / their sum if norm_weights,
//               * weights_scale if it is not 0
// The forward pass (Forward::MoeFeedForward in moe.cc) then sums
// weight * expert(x) over the chosen experts.
#ifndef WASTE_DAEMON_MODEL_MOE_H_
#define WASTE_DAEMON_MODEL_MOE_H_

#include <cstdint>

#include "daemon/model/hparams.h"

namespace waste::model {

// Routes one token. `logits` (n_expert) is overwritten with the
// probabilities; `bias` (n_expert) may be null; `select` is n_expert floats
// of scratch. Writes n_expert_used expert ids, best first (ties: lower id),
// and their weights. No allocation.
void RouteToken(const MoeParams& moe, float* logits, const float* bias, float* select, int32_t* ids,
                float* weights);

}  // namespace waste::model

#endif  // WASTE_DAEMON_MODEL_MOE_H_
