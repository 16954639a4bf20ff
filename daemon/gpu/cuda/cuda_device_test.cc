// CudaDevice against the CPU: every type's product equals the dequantized
// f32 dot (to float rounding) for single rows and batches, copies and
// events order the streams, ChunkUploader delivers chunks intact, and
// stream waits are measured. Without a GPU (or without --config=cuda) every
// test SKIPs and says why; tests/gpu/run_device_check.sh runs it on the
// device machine.
#include "daemon/gpu/cuda/cuda_device.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/gpu/chunk_uploader.h"
#include "daemon/kernels/dequantize.h"
#include "daemon/kernels/matvec.h"
#include "daemon/kernels/quantize.h"
#include "gtest/gtest.h"

namespace waste::gpu {
namespace {

using kernels::WeightType;

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto device = OpenCudaDevice();
    if (!device.ok()) GTEST_SKIP() << device.status().message();
    device_ = *std::move(device);
    std::printf("device: %s, %.1f GiB free\n", device_->name().c_str(),
                device_->memory_bytes() / 1073741824.0);
  }

  // Copies host bytes to new device memory through a pinned buffer.
  DevicePtr Upload(const void* data, uint64_t bytes) {
    auto pinned = device_->AllocatePinned(bytes);
    auto ptr = device_->Allocate(bytes);
    EXPECT_TRUE(pinned.ok() && ptr.ok());
    std::memcpy(*pinned, data, bytes);
    EXPECT_TRUE(device_->CopyToDevice(Stream::kCopy, *ptr, *pinned, bytes).ok());
    EXPECT_TRUE(device_->StreamSynchronize(Stream::kCopy).ok());
    device_->FreePinned(*pinned);
    return *ptr;
  }

  std::unique_ptr<Device> device_;
};

TEST(CudaDeviceOpenTest, SaysWhyThereIsNoDevice) {
  auto device = OpenCudaDevice();
  if (device.ok()) GTEST_SKIP() << "a CUDA device is present: " << (*device)->name();
  EXPECT_EQ(device.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(device.status().message().find("no CUDA device"), std::string::npos) << device.status();
}

// Every type the CPU computes.
constexpr auto& kDeviceTypes = kernels::kAllWeightTypes;

// Selects the block types' kernel for the products that follow: the
// grouped one (the default) or the plain per-element one.
void UseElementwiseKernel(bool elementwise) {
  if (elementwise) {
    setenv("WASTE_CUDA_ELEMENTWISE", "1", 1);
  } else {
    unsetenv("WASTE_CUDA_ELEMENTWISE");
  }
}

class CudaKernelTest : public CudaDeviceTest, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    CudaDeviceTest::SetUp();
    UseElementwiseKernel(GetParam());
  }
  void TearDown() override { UseElementwiseKernel(false); }
  const char* kernel() const { return GetParam() ? "elementwise" : "grouped"; }
};

INSTANTIATE_TEST_SUITE_P(Kernels, CudaKernelTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Elementwise" : "Grouped"; });

TEST_P(CudaKernelTest, EveryTypeMatchesTheDequantizedDot) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  const int64_t rows = 97, cols = 1024;  // Rows not a multiple of the warps per block.
  for (WeightType type : kDeviceTypes) {
    ASSERT_TRUE(DeviceComputes(type));
    const std::string type_name(kernels::GetWeightTypeInfo(type).name);
    const int64_t row_bytes = kernels::RowBytes(type, cols);
    std::vector<float> w(rows * cols), deq(rows * cols);
    for (float& v : w) v = normal(rng);
    std::vector<uint8_t> q(rows * row_bytes);
    for (int64_t r = 0; r < rows; ++r) {
      kernels::QuantizeRow(type, &w[r * cols], &q[r * row_bytes], cols);
      kernels::DequantizeRow(type, &q[r * row_bytes], &deq[r * cols], cols);
    }
    DevicePtr dw = Upload(q.data(), q.size());
    for (int64_t batch : {1, 3, 9, 64}) {
      SCOPED_TRACE(absl::StrCat(type_name, " batch ", batch));
      std::vector<float> x(batch * cols);
      for (float& v : x) v = normal(rng);
      DevicePtr dx = Upload(x.data(), x.size() * 4);
      auto dy = device_->Allocate(batch * rows * 4);
      ASSERT_TRUE(dy.ok());
      DeviceMatrix m{type, rows, cols, dw, row_bytes};
      ASSERT_TRUE(device_->MatMul(Stream::kCompute, m, dx, cols, batch, *dy, rows).ok());
      std::vector<float> y(batch * rows);
      ASSERT_TRUE(device_->CopyToHost(Stream::kCompute, y.data(), *dy, y.size() * 4).ok());
      ASSERT_TRUE(device_->StreamSynchronize(Stream::kCompute).ok());
      double worst = 0;
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t r = 0; r < rows; ++r) {
          double ref = 0, mag = 0;
          for (int64_t c = 0; c < cols; ++c) {
            ref += double(deq[r * cols + c]) * x[b * cols + c];
            mag += std::fabs(double(deq[r * cols + c]) * x[b * cols + c]);
          }
          const double err = std::fabs(y[b * rows + r] - ref);
          worst = std::max(worst, err / (mag + 1e-30));
          ASSERT_LE(err, 1e-5 * mag + 1e-6) << "row " << r << " of batch " << b;
        }
      }
      std::printf("%s %-6s batch %2lld: worst |gpu - f32 dot| / sum|w x| = %.2e\n", kernel(),
                  type_name.c_str(), static_cast<long long>(batch), worst);
      device_->Free(dx);
      device_->Free(*dy);
    }
    device_->Free(dw);
  }
}

// Each type's product over a matrix several times the L2 (a 256-row tile
// repeated, so that quantizing stays quick), batch 1 and 8: rows equal their
// tile row's result, and the weight bytes per second are printed.
TEST_P(CudaKernelTest, ProductThroughput) {
  const int64_t tile_rows = 256, cols = 4096, rows = 65536, repeats = 10;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> tile(tile_rows * cols), x(8 * cols);
  for (float& v : tile) v = normal(rng);
  for (float& v : x) v = normal(rng);
  DevicePtr dx = Upload(x.data(), x.size() * 4);
  auto dy = device_->Allocate(8 * rows * 4);
  ASSERT_TRUE(dy.ok());
  for (WeightType type : kDeviceTypes) {
    const std::string type_name(kernels::GetWeightTypeInfo(type).name);
    const int64_t row_bytes = kernels::RowBytes(type, cols);
    std::vector<uint8_t> q(rows * row_bytes);
    for (int64_t r = 0; r < tile_rows; ++r) {
      kernels::QuantizeRow(type, &tile[r * cols], &q[r * row_bytes], cols);
    }
    for (int64_t r = tile_rows; r < rows; r += tile_rows) {
      std::memcpy(&q[r * row_bytes], q.data(), tile_rows * row_bytes);
    }
    DevicePtr dw = Upload(q.data(), q.size());
    const DeviceMatrix m{type, rows, cols, dw, row_bytes};
    std::printf("%s %-6s %4.0f MiB:", kernel(), type_name.c_str(), q.size() / 1048576.0);
    for (int64_t batch : {1, 8}) {
      ASSERT_TRUE(device_->MatMul(Stream::kCompute, m, dx, cols, batch, *dy, rows).ok());
      ASSERT_TRUE(device_->StreamSynchronize(Stream::kCompute).ok());
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < repeats; ++i) {
        ASSERT_TRUE(device_->MatMul(Stream::kCompute, m, dx, cols, batch, *dy, rows).ok());
      }
      ASSERT_TRUE(device_->StreamSynchronize(Stream::kCompute).ok());
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / repeats;
      std::vector<float> y(batch * rows);
      ASSERT_TRUE(device_->CopyToHost(Stream::kCompute, y.data(), *dy, y.size() * 4).ok());
      ASSERT_TRUE(device_->StreamSynchronize(Stream::kCompute).ok());
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t r = tile_rows; r < rows; r += 997) {
          ASSERT_EQ(y[b * rows + r], y[b * rows + r % tile_rows]) << type_name << " row " << r;
        }
      }
      std::printf("  batch %lld %7.1f GB/s (%.1f us)", static_cast<long long>(batch),
                  q.size() / seconds / 1e9, seconds * 1e6);
    }
    std::printf("\n");
    device_->Free(dw);
  }
  device_->Free(dx);
  device_->Free(*dy);
}

TEST_F(CudaDeviceTest, BadShapesAreRefused) {
  auto buffer = device_->Allocate(1 << 20);
  ASSERT_TRUE(buffer.ok());
  DeviceMatrix m{WeightType::kQ4_K, 4, 256, *buffer, 100};  // Rows of 144 bytes.
  EXPECT_EQ(device_->MatMul(Stream::kCompute, m, *buffer, 256, 1, *buffer, 4).code(),
            absl::StatusCode::kInvalidArgument);
  m.row_stride_bytes = 144;
  m.cols = 100;
  EXPECT_EQ(device_->MatMul(Stream::kCompute, m, *buffer, 256, 1, *buffer, 4).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<uint8_t> pageable(64);
  EXPECT_EQ(device_->CopyToDevice(Stream::kCopy, *buffer, pageable.data(), 64).code(),
            absl::StatusCode::kInvalidArgument);
  device_->Free(*buffer);
}

TEST_F(CudaDeviceTest, UploaderPipelineDeliversChunksAndOverlapsCopies) {
  // 8 layers of a 4096 x 4096 Q4_K matrix (9 MiB each): copy one while the
  // previous computes, as ChunkUploader's test does on the fake device.
  constexpr int kLayers = 8;
  const int64_t rows = 4096, cols = 4096;
  const WeightType type = WeightType::kQ4_K;
  const int64_t row_bytes = kernels::RowBytes(type, cols);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<std::vector<uint8_t>> layers(kLayers, std::vector<uint8_t>(rows * row_bytes));
  std::vector<float> row(cols);
  for (auto& layer : layers) {
    for (int64_t r = 0; r < rows; ++r) {
      for (float& v : row) v = normal(rng);
      kernels::QuantizeRow(type, row.data(), &layer[r * row_bytes], cols);
    }
  }
  std::vector<float> x(cols);
  for (float& v : x) v = normal(rng);
  DevicePtr dx = Upload(x.data(), x.size() * 4);
  auto dy = device_->Allocate(kLayers * rows * 4);
  ASSERT_TRUE(dy.ok());
  ChunkUploaderOptions o;
  o.slot_bytes = rows * row_bytes;
  auto uploader = ChunkUploader::Create(device_.get(), o);
  ASSERT_TRUE(uploader.ok()) << uploader.status();
  const auto start = std::chrono::steady_clock::now();
  auto slot = (*uploader)->Upload(0, layers[0].data(), layers[0].size());
  ASSERT_TRUE(slot.ok());
  for (int l = 0; l < kLayers; ++l) {
    auto w = (*uploader)->Use(*slot);
    ASSERT_TRUE(w.ok()) << w.status();
    DeviceMatrix m{type, rows, cols, *w, row_bytes};
    ASSERT_TRUE(device_->MatMul(Stream::kCompute, m, dx, cols, 1, *dy + l * rows * 4, rows).ok());
    ASSERT_TRUE((*uploader)->Done(*slot).ok());
    if (l + 1 < kLayers) {
      slot = (*uploader)->Upload(l + 1, layers[l + 1].data(), layers[l + 1].size());
      ASSERT_TRUE(slot.ok()) << slot.status();
    }
  }
  std::vector<float> y(kLayers * rows);
  ASSERT_TRUE(device_->CopyToHost(Stream::kCompute, y.data(), *dy, y.size() * 4).ok());
  ASSERT_TRUE(device_->StreamSynchronize(Stream::kCompute).ok());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<float> deq(cols);
  for (int l = 0; l < kLayers; ++l) {
    for (int64_t r = 0; r < rows; r += 511) {
      kernels::DequantizeRow(type, &layers[l][r * row_bytes], deq.data(), cols);
      double ref = 0, mag = 0;
      for (int64_t c = 0; c < cols; ++c)
        ref += double(deq[c]) * x[c], mag += std::fabs(deq[c] * x[c]);
      ASSERT_LE(std::fabs(y[l * rows + r] - ref), 1e-5 * mag + 1e-6)
          << "layer " << l << " row " << r;
    }
  }
  const DeviceStats stats = device_->Stats();
  const double mib = kLayers * o.slot_bytes / 1048576.0;
  std::printf(
      "pipeline: %d layers, %.0f MiB copied in %.2f ms (%.1f GB/s end to end); compute "
      "stream waited %.2f ms for copies, copy stream %.2f ms for compute; host staging "
      "wait %.2f ms\n",
      kLayers, mib, seconds * 1e3, mib * 1048576.0 / seconds / 1e9,
      stats.stream_wait_seconds[0] * 1e3, stats.stream_wait_seconds[1] * 1e3,
      (*uploader)->stats().staging_wait_seconds * 1e3);
  EXPECT_EQ((*uploader)->stats().uploads, kLayers);
  device_->Free(dx);
  device_->Free(*dy);
}

}  // namespace
}  // namespace waste::gpu
