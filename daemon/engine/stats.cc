#include "daemon/engine/stats.h"

namespace waste::engine {

v1::EngineStats StatsDelta(const cache::ChunkStoreStats& before,
                           const cache::ChunkStoreStats& after) {
  v1::EngineStats out;
  out.set_cache_hits(after.hits - before.hits);
  out.set_cache_misses(after.misses - before.misses);
  out.set_prefetch_hits(after.prefetch_hits - before.prefetch_hits);
  out.set_prefetch_wasted(after.prefetch_wasted - before.prefetch_wasted);
  out.set_bytes_read(after.bytes_read - before.bytes_read);
  double busy = after.read_busy_seconds - before.read_busy_seconds;
  out.set_read_gbps(busy > 0 ? static_cast<double>(out.bytes_read()) / busy / 1e9 : 0);
  out.set_io_wait_ms((after.io_wait_seconds - before.io_wait_seconds) * 1e3);
  out.set_pool_used_bytes(after.resident_bytes);
  out.set_pool_capacity_bytes(after.capacity_bytes);
  out.set_read_retries(after.read_retries - before.read_retries);
  return out;
}

v1::EngineStats ToEngineStats(const cache::ChunkStoreStats& stats) {
  return StatsDelta(cache::ChunkStoreStats{}, stats);
}

}  // namespace waste::engine
