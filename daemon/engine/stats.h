// Conversions from the store's counters to the API's EngineStats.
#ifndef WASTE_DAEMON_ENGINE_STATS_H_
#define WASTE_DAEMON_ENGINE_STATS_H_

#include "daemon/cache/chunk_store.h"
#include "waste/v1/stats.pb.h"

namespace waste::engine {

// All counters of `stats` (gauges as they are now).
v1::EngineStats ToEngineStats(const cache::ChunkStoreStats& stats);

// Counters accumulated between `before` and `after`; gauges from `after`.
v1::EngineStats StatsDelta(const cache::ChunkStoreStats& before,
                           const cache::ChunkStoreStats& after);

}  // namespace waste::engine

#endif  // WASTE_DAEMON_ENGINE_STATS_H_
