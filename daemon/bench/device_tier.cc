#include "daemon/bench/device_tier.h"

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/format.h"
#include "common/status_macros.h"
#include "daemon/model/forward.h"

namespace waste::bench {
namespace {

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Host-to-device copy and batch-1 product bandwidth, on buffers freed
// before the weights arrive.
absl::Status Measure(gpu::Device* device, DeviceTier* tier) {
  constexpr uint64_t kCopyBytes = uint64_t{64} << 20;
  constexpr int64_t kRows = 16384, kCols = 4096;  // A Q4_K matrix of 36 MiB.
  const kernels::WeightType type = kernels::WeightType::kQ4_K;
  const uint64_t matrix_bytes = kRows * kernels::RowBytes(type, kCols);
  ASSIGN_OR_RETURN(void* pinned, device->AllocatePinned(kCopyBytes));
  std::memset(pinned, 0, kCopyBytes);  // Zero blocks: valid Q4_K (d = 0).
  absl::Status status;
  gpu::DevicePtr buffer, matrix, x, y;
  auto run = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(buffer, device->Allocate(kCopyBytes));
    RETURN_IF_ERROR(device->CopyToDevice(gpu::Stream::kCopy, buffer, pinned, kCopyBytes));
    RETURN_IF_ERROR(device->StreamSynchronize(gpu::Stream::kCopy));
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 4; ++i) {
      RETURN_IF_ERROR(device->CopyToDevice(gpu::Stream::kCopy, buffer, pinned, kCopyBytes));
    }
    RETURN_IF_ERROR(device->StreamSynchronize(gpu::Stream::kCopy));
    tier->h2d_gbps = 4 * kCopyBytes / Seconds(start) / 1e9;

    ASSIGN_OR_RETURN(matrix, device->Allocate(matrix_bytes));
    for (uint64_t done = 0; done < matrix_bytes; done += kCopyBytes) {
      RETURN_IF_ERROR(device->CopyToDevice(gpu::Stream::kCopy, matrix + done, pinned,
                                           std::min(kCopyBytes, matrix_bytes - done)));
    }
    ASSIGN_OR_RETURN(x, device->Allocate(kCols * sizeof(float)));
    ASSIGN_OR_RETURN(y, device->Allocate(kRows * sizeof(float)));
    RETURN_IF_ERROR(device->CopyToDevice(gpu::Stream::kCopy, x, pinned, kCols * sizeof(float)));
    RETURN_IF_ERROR(device->StreamSynchronize(gpu::Stream::kCopy));
    const gpu::DeviceMatrix m{type, kRows, kCols, matrix, kernels::RowBytes(type, kCols)};
    RETURN_IF_ERROR(device->MatMul(gpu::Stream::kCompute, m, x, kCols, 1, y, kRows));
    RETURN_IF_ERROR(device->StreamSynchronize(gpu::Stream::kCompute));
    start = std::chrono::steady_clock::now();
    constexpr int kProducts = 10;
    for (int i = 0; i < kProducts; ++i) {
      RETURN_IF_ERROR(device->MatMul(gpu::Stream::kCompute, m, x, kCols, 1, y, kRows));
    }
    RETURN_IF_ERROR(device->StreamSynchronize(gpu::Stream::kCompute));
    tier->product_gbps = kProducts * matrix_bytes / Seconds(start) / 1e9;
    return absl::OkStatus();
  };
  status = run();
  for (gpu::DevicePtr p : {buffer, matrix, x, y}) {
    if (p) device->Free(p);
  }
  device->FreePinned(pinned);
  return status;
}

}  // namespace

absl::StatusOr<DeviceTier> OpenDeviceTier(const std::string& kind, const model::Model& model,
                                          const storage::RandomAccessFile& file,
                                          const memory::MemoryPlan& plan) {
  DeviceTier tier;
  if (!plan.vram.enabled()) return tier;
  // A fake device gets the budget, and room for the measurement.
  absl::StatusOr<std::unique_ptr<gpu::Device>> device =
      model::OpenDevice(kind, std::max<uint64_t>(plan.vram.budget_bytes, uint64_t{256} << 20));
  if (!device.ok()) {
    return absl::Status(
        device.status().code(),
        absl::StrCat(device.status().message(), " (--device fake runs the VRAM tier on the CPU)"));
  }
  tier.device = *std::move(device);
  if (tier.device->memory_bytes() < plan.vram.budget_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(tier.device->name(), " has ", FormatBytes(tier.device->memory_bytes()),
                     " free, less than --vram-budget ", FormatBytes(plan.vram.budget_bytes)));
  }
  RETURN_IF_ERROR(Measure(tier.device.get(), &tier));
  ASSIGN_OR_RETURN(tier.weights, model::DeviceWeights::Load(tier.device.get(), model, file,
                                                            plan.in_vram, model::kMaxProductRows));
  return tier;
}

TierReport MakeTierReport(const DeviceTier& tier, const TierCounters& before,
                          const TierCounters& after, int64_t tokens, double decode_seconds,
                          double memory_gbps, double read_gbps, const memory::MemoryPlan& plan) {
  TierReport r;
  const double n = static_cast<double>(tokens);
  r.device = tier.device != nullptr ? tier.device->name() : "none";
  r.h2d_gbps = tier.h2d_gbps;
  r.product_gbps = tier.product_gbps;
  r.vram_bytes = (after.weights.product_bytes - before.weights.product_bytes) / n;
  r.disk_bytes = (after.bytes_read - before.bytes_read) / n;
  r.ram_bytes = std::max(0.0, (after.acquired_bytes - before.acquired_bytes) / n - r.disk_bytes);
  r.activation_bytes = (after.weights.activation_bytes - before.weights.activation_bytes) / n;
  r.products = (after.weights.products - before.weights.products) / n;
  r.synchronizations = (after.weights.synchronizations - before.weights.synchronizations) / n;
  r.product_seconds = (after.weights.product_seconds - before.weights.product_seconds) / n;
  r.token_seconds = decode_seconds / n;
  auto bound = [](double bytes, double gbps) { return gbps > 0 ? bytes / (gbps * 1e9) : 0; };
  r.hbm_seconds = bound(r.vram_bytes, tier.product_gbps);
  r.pcie_seconds = bound(r.activation_bytes, tier.h2d_gbps);
  r.ram_seconds = bound(r.ram_bytes, memory_gbps);
  r.disk_seconds = bound(r.disk_bytes, read_gbps);
  r.planned = plan.token;
  return r;
}

std::string TierText(const TierReport& r) {
  auto bytes = [](double b) { return FormatBytes(static_cast<int64_t>(b)); };
  auto share = [&](double s) { return r.token_seconds > 0 ? 100 * s / r.token_seconds : 0; };
  return absl::StrFormat(
      "device:         %s: host to device %.2f GB/s, products read weights at %.1f GB/s; "
      "%.1f products (%.1f waits) per token, %.3f ms of each token in them (%.1f%%), %s of "
      "activations over PCIe\n"
      "tiers:          per token VRAM %s, RAM %s, disk %s (planned VRAM %s, RAM %s, disk %s)\n"
      "bounds:         per token HBM %.3f ms (%.1f%% of the token), PCIe %.3f ms (%.1f%%), "
      "RAM %.3f ms (%.1f%%), disk %.3f ms (%.1f%%); token %.3f ms\n",
      r.device, r.h2d_gbps, r.product_gbps, r.products, r.synchronizations, 1e3 * r.product_seconds,
      share(r.product_seconds), bytes(r.activation_bytes), bytes(r.vram_bytes), bytes(r.ram_bytes),
      bytes(r.disk_bytes), bytes(r.planned.vram), bytes(r.planned.ram), bytes(r.planned.disk),
      1e3 * r.hbm_seconds, share(r.hbm_seconds), 1e3 * r.pcie_seconds, share(r.pcie_seconds),
      1e3 * r.ram_seconds, share(r.ram_seconds), 1e3 * r.disk_seconds, share(r.disk_seconds),
      1e3 * r.token_seconds);
}

void AddTierJson(const TierReport& r, nlohmann::ordered_json* j) {
  (*j)["device"] = r.device;
  (*j)["device_h2d_gbps"] = r.h2d_gbps;
  (*j)["device_product_gbps"] = r.product_gbps;
  (*j)["vram_bytes_per_token"] = r.vram_bytes;
  (*j)["ram_bytes_per_token"] = r.ram_bytes;
  (*j)["disk_bytes_per_token"] = r.disk_bytes;
  (*j)["planned_bytes_per_token"] = {
      {"vram", r.planned.vram}, {"ram", r.planned.ram}, {"disk", r.planned.disk}};
  (*j)["device_products_per_token"] = r.products;
  (*j)["device_synchronizations_per_token"] = r.synchronizations;
  (*j)["device_product_seconds_per_token"] = r.product_seconds;
  (*j)["pcie_activation_bytes_per_token"] = r.activation_bytes;
  (*j)["bound_seconds_per_token"] = {{"hbm", r.hbm_seconds},
                                     {"pcie", r.pcie_seconds},
                                     {"ram", r.ram_seconds},
                                     {"disk", r.disk_seconds}};
}

}  // namespace waste::bench
