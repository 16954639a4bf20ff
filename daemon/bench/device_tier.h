// The VRAM tier in `wasted bench`: the device (--device cuda|fake), the
// plan's VRAM chunks loaded onto it, the device's copy and product
// bandwidth measured in the same run, and the report's per-tier lines:
// bytes per token served from VRAM, RAM and disk, and how close decode
// came to each tier's bound (HBM, PCIe, RAM, disk).
#ifndef WASTE_DAEMON_BENCH_DEVICE_TIER_H_
#define WASTE_DAEMON_BENCH_DEVICE_TIER_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/gpu/device.h"
#include "daemon/memory/plan.h"
#include "daemon/model/device_weights.h"
#include "daemon/model/model.h"
#include "storage/env.h"

namespace waste::bench {

struct DeviceTier {
  std::unique_ptr<gpu::Device> device;
  std::unique_ptr<model::DeviceWeights> weights;
  double h2d_gbps = 0;      // Pinned host memory to the device.
  double product_gbps = 0;  // Weight bytes a batch-1 product reads per second.
};

// Opens `kind` ("cuda" or "fake"), measures it, and loads the plan's VRAM
// chunks. A plan without a VRAM tier gives an empty DeviceTier. No device
// (UNAVAILABLE) or one with less free memory than the budget is an error
// that says so.
absl::StatusOr<DeviceTier> OpenDeviceTier(const std::string& kind, const model::Model& model,
                                          const storage::RandomAccessFile& file,
                                          const memory::MemoryPlan& plan);

// Counters read before and after decode.
struct TierCounters {
  model::DeviceWeightsStats weights;
  int64_t acquired_bytes = 0;  // Weight bytes the CPU used from the store.
  int64_t bytes_read = 0;      // From disk.
};

struct TierReport {
  std::string device;
  double vram_bytes = 0, ram_bytes = 0, disk_bytes = 0;  // Per token.
  double activation_bytes = 0;                           // Per token, over PCIe.
  double products = 0;                                   // Per token.
  double h2d_gbps = 0, product_gbps = 0;                 // Measured (DeviceTier).
  double synchronizations = 0;                           // Per token: host waits.
  double product_seconds = 0;                            // Per token, host time.
  double token_seconds = 0;
  // Per-token lower bounds: bytes over each tier's measured bandwidth.
  double hbm_seconds = 0, pcie_seconds = 0, ram_seconds = 0, disk_seconds = 0;
  memory::TierBytes planned;
};

TierReport MakeTierReport(const DeviceTier& tier, const TierCounters& before,
                          const TierCounters& after, int64_t tokens, double decode_seconds,
                          double memory_gbps, double read_gbps, const memory::MemoryPlan& plan);
std::string TierText(const TierReport& report);
void AddTierJson(const TierReport& report, nlohmann::ordered_json* j);

}  // namespace waste::bench

#endif  // WASTE_DAEMON_BENCH_DEVICE_TIER_H_
