#include "daemon/engine/planning.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/model/model_plan.h"

namespace waste::engine {

int64_t ContextLengthFor(const model::HParams& hp, const v1::ModelConfig& config) {
  return config.has_context_length() ? config.context_length()
                                     : std::min<int64_t>(hp.n_ctx_train, kDefaultContextCap);
}

int MaxConcurrentRequests(const v1::ModelConfig& config) {
  const int n = config.has_max_concurrent_requests() ? config.max_concurrent_requests()
                                                     : kDefaultMaxConcurrentRequests;
  return std::clamp(n, 1, kMaxConcurrentRequestsLimit);
}

int MaxQueuedRequests(const v1::ModelConfig& config) {
  return std::max(0, config.has_max_queued_requests() ? config.max_queued_requests()
                                                      : kDefaultMaxQueuedRequests);
}

kernels::ops::KvType KvTypeFor(const v1::ModelConfig& config) {
  return config.kv_cache_type() == v1::KV_CACHE_TYPE_F32 ? kernels::ops::KvType::kF32
                                                         : kernels::ops::KvType::kF16;
}

absl::StatusOr<ModelPlan> PlanModel(const model::Model& model, const v1::ModelConfig& config,
                                    int64_t n_ctx,
                                    const std::vector<memory::ChunkId>& hot_experts) {
  if (n_ctx <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("context_length must be positive, is ", n_ctx));
  }
  ModelPlan planned;
  ASSIGN_OR_RETURN(planned.usable, memory::DetectUsableRam());
  memory::PlanInput input =
      model::PlanInputFor(model, n_ctx, KvTypeFor(config), MaxConcurrentRequests(config));
  memory::PlanOptions options;
  if (config.has_prefetch_depth()) options.prefetch_depth = config.prefetch_depth();
  if (config.vram_budget_bytes() > 0) {
    options.vram_budget_bytes = static_cast<uint64_t>(config.vram_budget_bytes());
    input.expert_preference = hot_experts;
  }
  memory::PlanSizes sizes =
      memory::ComputePlanSizes(input, options, planned.usable.bytes, planned.usable.source);
  uint64_t budget = config.has_ram_budget_bytes()
                        ? static_cast<uint64_t>(config.ram_budget_bytes())
                        : std::max(sizes.recommended_bytes, sizes.floor_bytes);
  ASSIGN_OR_RETURN(planned.plan, memory::PlanMemory(input, budget, options, planned.usable.bytes,
                                                    planned.usable.source));
  return planned;
}

v1::MemoryPlan ToProto(const model::Model& model, const ModelPlan& planned) {
  const memory::MemoryPlan& plan = planned.plan;
  v1::MemoryPlan out;
  out.set_model_bytes(static_cast<int64_t>(model.weight_bytes()));
  out.set_ram_budget_bytes(static_cast<int64_t>(plan.budget_bytes));
  out.set_floor_bytes(static_cast<int64_t>(plan.sizes.floor_bytes));
  out.set_recommended_bytes(static_cast<int64_t>(plan.sizes.recommended_bytes));
  out.set_pinned_bytes(static_cast<int64_t>(plan.pinned_bytes));
  out.set_pool_bytes(static_cast<int64_t>(plan.streaming_bytes));
  out.set_kv_cache_bytes(static_cast<int64_t>(plan.sizes.kv_bytes));
  out.set_scratch_bytes(static_cast<int64_t>(plan.sizes.scratch_bytes));
  out.set_step_tokens(static_cast<int32_t>(plan.step_tokens));
  out.set_bytes_read_per_token(static_cast<int64_t>(plan.read_bytes_per_token));
  out.set_prefetch_depth(plan.prefetch_depth);
  out.set_usable_ram_bytes(static_cast<int64_t>(planned.usable.bytes));
  out.set_usable_ram_source(planned.usable.source);
  out.set_explanation(plan.Explain());
  out.set_fits(true);
  out.set_concurrent_sessions(plan.sessions);
  out.set_max_sessions(plan.sessions_that_fit);
  out.set_session_bytes(static_cast<int64_t>(plan.sizes.kv_bytes));
  if (plan.vram.enabled()) {
    out.set_vram_budget_bytes(static_cast<int64_t>(plan.vram.budget_bytes));
    out.set_vram_weight_bytes(static_cast<int64_t>(plan.vram.weight_bytes));
    out.set_vram_scratch_bytes(static_cast<int64_t>(plan.vram.scratch_bytes));
    out.set_vram_chunks(static_cast<int32_t>(plan.vram.chunks.size()));
    out.set_vram_eligible_chunks(plan.vram.eligible_chunks);
  }
  auto tiers = [](const memory::TierBytes& t, v1::TierBytes* out) {
    out->set_vram(static_cast<int64_t>(t.vram));
    out->set_ram(static_cast<int64_t>(t.ram));
    out->set_disk(static_cast<int64_t>(t.disk));
  };
  tiers(plan.resident, out.mutable_resident_bytes());
  tiers(plan.token, out.mutable_bytes_per_token());
  // Bytes and resident bytes by kind of chunk.
  struct Part {
    int64_t bytes = 0, resident = 0, vram = 0;
  };
  std::map<std::string, Part> parts;
  for (const memory::ChunkSpec& chunk : model.chunks()) {
    Part& part = parts[memory::ChunkKindName(chunk.kind)];
    const int64_t bytes = static_cast<int64_t>(chunk.tensor_bytes);
    const bool in_vram = plan.in_vram[chunk.id];
    part.bytes += bytes;
    if (plan.is_pinned[chunk.id] || in_vram) part.resident += bytes;
    if (in_vram) part.vram += bytes;
  }
  for (const auto& [name, p] : parts) {
    v1::PlanPart* part = out.add_parts();
    part->set_part(name);
    part->set_bytes(p.bytes);
    part->set_resident_bytes(p.resident);
    part->set_vram_bytes(p.vram);
  }
  return out;
}

}  // namespace waste::engine
