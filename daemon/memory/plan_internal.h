// Internal to daemon/memory: what the plan (plan.cc) and its explanation
// (plan_explain.cc) share.
#ifndef WASTE_DAEMON_MEMORY_PLAN_INTERNAL_H_
#define WASTE_DAEMON_MEMORY_PLAN_INTERNAL_H_

#include <cstdint>
#include <string>

#include "common/format.h"

namespace waste::memory::internal {

inline std::string Bytes(uint64_t bytes) { return FormatBytes(static_cast<int64_t>(bytes)); }

// Streaming slots a MoE plan with a streamed trunk needs at least: two
// chunks in use at once (a layer's FFN trunk and one of its experts, or the
// next layer's trunk for router lookahead), top-k being read ahead, and
// top-k more so a demand read never waits for a read-ahead to land.
inline int MinTrunkStreamingSlots(int experts_per_token) { return 2 * experts_per_token + 2; }

// Trunk chunks larger than an expert (attention, a dense FFN, a trunk with
// shared experts) stream through slots of their own size, these many: the
// FFN trunk in use, the next layer's (router lookahead) and one read ahead.
// The expert-sized slots stay expert-sized.
inline constexpr int kLargeTrunkSlots = 3;

}  // namespace waste::memory::internal

#endif  // WASTE_DAEMON_MEMORY_PLAN_INTERNAL_H_
