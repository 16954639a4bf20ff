// The memory plan of a model under a RAM budget: what the least is that can
// run (the floor), what it would take to keep everything resident (the
// recommended size), and for a given budget which chunks are pinned, how
// many streaming slots the pool has, how many bytes a token reads from disk
// and how far ahead the store prefetches.
//
// The plan works on chunk specs and byte counts (PlanInput), not on a Model,
// so cache and scheduler tests can plan synthetic layouts;
// daemon/model/model_plan.h builds a PlanInput from a Model.
//
// Pinning order: the global chunk (embeddings, output head) first, then
// whole layers (attention + FFN), first and last layers preferred (0, L-1,
// 1, L-2, ...): they are the ones every request starts and ends with, and
// for a dense model every pinned byte is a byte not read per token. Single
// chunks fill what whole layers leave.
//
// The VRAM tier (PlanOptions::vram_budget_bytes > 0): a GPU's memory comes
// first. It holds the device's step activations, then the trunk: the global
// chunk (output head), then whole layers' attention and FFN (for MoE the
// FFN trunk: norm, router, shared experts) in the same preference order,
// then single chunks, then routed experts in the caller's order (hotlist /
// LFU counts, hottest first; else by id). Only chunks the device can compute
// (PlanInput::vram_eligible) go there. Everything else is planned in RAM
// exactly as without a GPU: the RAM plan (floor, recommended, pinning,
// slots) is the plan of the chunks not in VRAM. The plan then says per tier
// what is resident and how many bytes a token is served from each (VRAM
// hits, RAM, disk reads). With vram_budget_bytes 0 the plan is the two-tier
// one, field for field.
//
// Thread-safety: plain values and free functions.
#ifndef WASTE_DAEMON_MEMORY_PLAN_H_
#define WASTE_DAEMON_MEMORY_PLAN_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/memory/chunk_spec.h"

namespace waste::memory {

// What the plan needs to know of a model and a context.
struct PlanInput {
  std::span<const ChunkSpec> chunks;  // Ids 0..n-1 in order; borrowed.
  int64_t n_ctx = 0;
  uint64_t kv_bytes = 0;       // One session: KV cache for n_ctx positions, logits.
  uint64_t scratch_bytes = 0;  // The step's activations and matvec scratch (once).
  // The rows of a step that scratch_bytes holds.
  int64_t step_tokens = 0;
  // Larger steps, largest first, that a plan whose weights stream may give a
  // prompt instead (each step reads the streamed weights once, so a prompt
  // in larger steps reads them fewer times), with their scratch.
  struct StepSize {
    int64_t tokens = 0;
    uint64_t scratch_bytes = 0;
  };
  std::vector<StepSize> streaming_steps;
  // Sessions that run together (each with its own KV cache): the plan
  // reserves this many when the budget holds them above the floor (which
  // counts one), before it pins weights with the rest.
  int max_sessions = 1;
  // MoE: routed experts per token per MoE layer (top-k). Required when the
  // chunks include kExpert chunks.
  int experts_per_token = 0;

  // The VRAM tier (only read when PlanOptions::vram_budget_bytes > 0).
  // Chunks the device can compute (every matrix of a type its kernels
  // take), by ChunkId; empty: every chunk.
  std::vector<bool> vram_eligible;
  // Routed experts in the order they claim VRAM, hottest first (a hotlist,
  // LFU counts); experts not listed follow by id. Empty: by id.
  std::vector<ChunkId> expert_preference;
  // Device memory one step's activations take there (the input and output
  // of the widest product for the step's rows), once per model.
  uint64_t vram_scratch_bytes = 0;
};

struct PlanOptions {
  // Chunks read ahead of the one in use when the budget allows; the pool
  // gets prefetch_depth + 1 streaming slots (at least 2).
  int prefetch_depth = 2;
  // Memory the process needs besides weights, KV and scratch (code, thread
  // stacks, tokenizer, logits, I/O queues); measured ~30 MiB on a 7B-shaped
  // model, rounded up.
  uint64_t runtime_bytes = uint64_t{64} << 20;
  // When recommending less than usable RAM, leave this much to the system
  // (at least; 10% of usable RAM when that is more).
  uint64_t system_reserve_bytes = uint64_t{1} << 30;
  // Device memory the model may use (the VRAM tier; see the file comment).
  // 0: no VRAM tier.
  uint64_t vram_budget_bytes = 0;
  // Device buffers that chunks not resident in VRAM are copied up into for
  // a step (one in use, one being copied: 2 double-buffers). 0: such chunks
  // are computed on the CPU where they are (RAM pool or stream). Reserved
  // only when the budget holds them after the activations. (gpu/
  // ChunkUploader schedules such copies; the forward pass does not use it
  // yet, so the engine plans with 0.)
  int vram_copy_slots = 0;
};

// What the VRAM tier holds.
struct VramPlan {
  uint64_t budget_bytes = 0;   // 0: no VRAM tier.
  uint64_t scratch_bytes = 0;  // The step's activations on the device.
  uint64_t weight_bytes = 0;   // Slots of the chunks resident in VRAM.
  int copy_slots = 0;          // Buffers for chunks copied up per step.
  uint64_t copy_slot_bytes = 0;
  uint64_t unused_bytes = 0;
  std::vector<ChunkId> chunks;  // Resident in VRAM, in placement order.
  bool global = false;          // The global chunk (output head) is there.
  int trunk_layers = 0;         // Layers whose non-expert chunks all are.
  int experts = 0;              // Routed experts there.
  int eligible_chunks = 0;      // Chunks the device could compute.
  bool enabled() const { return budget_bytes > 0; }
  uint64_t used_bytes() const {
    return scratch_bytes + weight_bytes + copy_slots * copy_slot_bytes;
  }
};

// Bytes by tier: VRAM, RAM, disk.
struct TierBytes {
  uint64_t vram = 0;
  uint64_t ram = 0;
  uint64_t disk = 0;
  uint64_t total() const { return vram + ram + disk; }
};

// The sizes that do not depend on a budget.
struct PlanSizes {
  uint64_t weight_bytes = 0;  // Slots of all chunks (aligned sizes in memory).
  uint64_t global_bytes = 0;  // Chunks of kind kGlobal: always pinned.
  // The kEmbeddings chunk (0 when the embeddings are tied to the output and
  // so global): pinned only when everything is, else read a row at a time.
  uint64_t embedding_bytes = 0;
  uint64_t embedding_row_bytes = 0;
  uint64_t largest_streamed_slot = 0;
  uint64_t kv_bytes = 0;  // Per session.
  uint64_t scratch_bytes = 0;
  uint64_t runtime_bytes = 0;
  int max_sessions = 1;
  // global + one session's KV + scratch + runtime + 2 x largest streamed
  // chunk (one in use, one being read). Everything resident needs no slots,
  // so when that is smaller it is the floor.
  uint64_t floor_bytes = 0;
  // Everything resident + max_sessions x KV + scratch + runtime, or when
  // that exceeds usable RAM, usable RAM less a reserve (recommended_capped
  // says so).
  uint64_t recommended_bytes = 0;
  bool recommended_capped = false;
  uint64_t all_resident_bytes = 0;
  std::optional<uint64_t> usable_bytes;  // When the caller knew it.
  std::string usable_source;

  // Mixture-of-experts models only (moe == true); see the file comment.
  bool moe = false;
  uint64_t trunk_bytes = 0;        // Every chunk but routed experts (global included).
  uint64_t expert_bytes = 0;       // Slots of all routed experts.
  uint64_t expert_slot_bytes = 0;  // The largest expert chunk.
  int n_experts = 0;               // Expert chunks over all layers.
  int moe_layers = 0;
  int experts_per_token = 0;  // Top-k per MoE layer.
  // top-k x MoE layers x expert slot: what one token's experts occupy.
  uint64_t expert_working_set_bytes = 0;
  // top-k x MoE layers x the mean expert's read bytes: what a token reads
  // when no expert is cached.
  uint64_t active_expert_read_bytes = 0;
  // The least budget that pins the whole trunk: trunk + one session's KV +
  // scratch + runtime + 2 x top-k expert slots. Below it the trunk streams
  // too (see PlanMemory), down to floor_bytes.
  uint64_t trunk_floor_bytes = 0;
  // The largest trunk chunk but the global one (attention, a dense FFN, a
  // MoE layer's norm + router + shared experts).
  uint64_t largest_trunk_slot = 0;
};

struct MemoryPlan {
  PlanSizes sizes;
  uint64_t budget_bytes = 0;
  int64_t n_ctx = 0;

  std::vector<ChunkId> pinned;  // In pinning order.
  std::vector<bool> is_pinned;  // By ChunkId.
  uint64_t pinned_bytes = 0;
  int pinned_layers = 0;  // Layers with every chunk pinned.
  int n_layers = 0;

  // The rows of a step the scratch is counted for: where weights stream,
  // the largest of PlanInput's streaming_steps whose extra scratch is at
  // most a sixteenth of the budget and leaves it above the floor with as
  // many sessions, else PlanInput's step_tokens.
  int64_t step_tokens = 0;

  int streaming_slots = 0;  // 0 when everything is pinned; both sizes.
  uint64_t slot_bytes = 0;  // Each slot: the largest unpinned chunk (but see large_slots).
  // Of streaming_slots, those of large_slot_bytes: a MoE plan whose trunk
  // streams gives the trunk chunks larger than an expert a few slots of
  // their size, and every other slot is expert-sized (slot_bytes). 0 when
  // all slots are equal.
  int large_slots = 0;
  uint64_t large_slot_bytes = 0;
  uint64_t streaming_bytes = 0;
  int prefetch_depth = 0;     // Default for the store: streaming_slots - 1.
  uint64_t unused_bytes = 0;  // Budget left over (too small for any chunk).

  // Sessions with a KV cache reserved (1..max_sessions), and how many this
  // budget could hold at this context above the floor.
  int sessions = 1;
  int sessions_that_fit = 1;
  uint64_t kv_total_bytes() const { return sessions * sizes.kv_bytes; }

  // Bytes read from disk per token: the unpinned chunks' extents (a dense
  // token touches every chunk once). MoE: the expected expert misses under
  // uniform routing, (1 - expert_cache_fraction) x active expert bytes.
  uint64_t read_bytes_per_token = 0;
  // MoE: expert slots / routed experts, at most 1.
  double expert_cache_fraction = 0;
  int streamed_chunks = 0;
  // The order a dense token acquires its non-global chunks in, for the
  // store's prefetch to follow across the token boundary. For MoE only the
  // streamed trunk chunks (empty when the trunk is pinned): which experts
  // come next is known only from the router, so the store reads only what
  // it is told.
  std::vector<ChunkId> access_order;
  // MoE under trunk_floor_bytes: trunk chunks stream through the slots as
  // well (the global chunk stays pinned).
  bool trunk_streamed = false;
  // The embedding table (a kEmbeddings chunk) is not pinned: its rows are
  // read from the file as tokens need them (see ChunkKind::kEmbeddings).
  bool embeddings_on_disk = false;
  int streamed_trunk_chunks = 0;

  // The VRAM tier (vram.enabled() when PlanOptions asked for one), and
  // which chunks it holds, by ChunkId (all false without it). A chunk in
  // VRAM is neither pinned in RAM nor streamed: the RAM fields above are
  // about the other chunks, and `sizes` are theirs.
  VramPlan vram;
  std::vector<bool> in_vram;
  // Weight bytes resident per tier: VRAM, RAM (pinned + streaming slots),
  // and on disk only (neither pinned nor in VRAM; read into slots on use).
  TierBytes resident;
  // Bytes of the chunks a decode token uses, by the tier that serves them
  // (MoE experts: expected under uniform routing). token.disk is
  // read_bytes_per_token.
  TierBytes token;

  bool all_resident() const { return streaming_slots == 0; }
  // Router lookahead (reading the next layer's likely experts while this
  // layer computes) pays when experts are read from disk: its default
  // (ModelConfig.router_lookahead overrides it).
  bool lookahead_by_default() const { return sizes.moe && !all_resident(); }
  // The pool the store allocates: pinned + slots.
  uint64_t pool_bytes() const { return pinned_bytes + streaming_bytes; }

  // A few lines for people: floor, recommended, the budget's split, what a
  // token reads; with a VRAM tier, what it holds and the three tiers' bytes.
  std::string Explain() const;

 private:
  void ExplainDense(std::string* out) const;
  void ExplainMoe(std::string* out) const;
  void ExplainSessions(std::string* out) const;
  void ExplainVram(std::string* out) const;
  void ExplainTiers(std::string* out) const;
};

// The budget-independent sizes (of the RAM tier: with a VRAM tier, of the
// chunks not in VRAM). `usable_bytes` (when known) caps the recommendation.
PlanSizes ComputePlanSizes(const PlanInput& input, const PlanOptions& options,
                           std::optional<uint64_t> usable_bytes = std::nullopt,
                           const std::string& usable_source = "");

// The plan for `budget_bytes`. A budget under the floor is
// RESOURCE_EXHAUSTED with the floor's parts in the message and a pointer to
// `wasted plan`. A model without chunks, or with expert chunks but no
// experts_per_token, is INVALID_ARGUMENT. A VRAM budget under the device's
// step activations is RESOURCE_EXHAUSTED.
absl::StatusOr<MemoryPlan> PlanMemory(const PlanInput& input, uint64_t budget_bytes,
                                      const PlanOptions& options = {},
                                      std::optional<uint64_t> usable_bytes = std::nullopt,
                                      const std::string& usable_source = "");

}  // namespace waste::memory

#endif  // WASTE_DAEMON_MEMORY_PLAN_H_
