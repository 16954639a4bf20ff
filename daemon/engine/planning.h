// How a model is fitted into its RAM budget at load, and the Plan RPC's
// answer: the memory plan of daemon/memory for a loaded or unloaded model,
// with usable RAM detected from cgroup limits.
#ifndef WASTE_DAEMON_ENGINE_PLANNING_H_
#define WASTE_DAEMON_ENGINE_PLANNING_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/kernels/ops/attention.h"
#include "daemon/memory/plan.h"
#include "daemon/memory/usable_ram.h"
#include "daemon/model/model.h"
#include "waste/v1/config.pb.h"
#include "waste/v1/models.pb.h"

namespace waste::engine {

// Default context when neither the request nor the config sets one: the
// trained context, capped so the KV cache stays modest.
inline constexpr int64_t kDefaultContextCap = 4096;

// Sessions per batch and queued requests when the config does not say
// (DaemonConfig's fields fill ModelConfig's; see Engine::ConfigFor).
inline constexpr int kDefaultMaxConcurrentRequests = 4;
inline constexpr int kMaxConcurrentRequestsLimit = 32;
inline constexpr int kDefaultMaxQueuedRequests = 64;

int64_t ContextLengthFor(const model::HParams& hp, const v1::ModelConfig& config);
// The config's max_concurrent_requests clamped to 1..32, or the default.
int MaxConcurrentRequests(const v1::ModelConfig& config);
int MaxQueuedRequests(const v1::ModelConfig& config);
kernels::ops::KvType KvTypeFor(const v1::ModelConfig& config);

// The plan for `model` under the config's budget (default: the recommended
// size for usable RAM), with a VRAM tier when the config has a
// vram_budget_bytes (the hottest experts first when `hot_experts`, hottest
// first, is given). A budget under the floor is RESOURCE_EXHAUSTED with the
// plan's numbers and a pointer to `wasted plan`.
struct ModelPlan {
  memory::MemoryPlan plan;
  memory::UsableRam usable;
};
absl::StatusOr<ModelPlan> PlanModel(const model::Model& model, const v1::ModelConfig& config,
                                    int64_t n_ctx,
                                    const std::vector<memory::ChunkId>& hot_experts = {});

// The API's view of a plan.
v1::MemoryPlan ToProto(const model::Model& model, const ModelPlan& planned);

}  // namespace waste::engine

#endif  // WASTE_DAEMON_ENGINE_PLANNING_H_
