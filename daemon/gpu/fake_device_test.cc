// FakeDevice: memory, pinned staging, stream order and events, products by
// the CPU kernels, and the simulated timeline the copy-scheduling tests
// read.
#include "daemon/gpu/fake_device.h"

#include <cstring>
#include <random>
#include <vector>

#include "daemon/kernels/matvec.h"
#include "daemon/kernels/quantize.h"
#include "gtest/gtest.h"

namespace waste::gpu {
namespace {

TEST(FakeDeviceTest, MemoryIsCappedAndCounted) {
  FakeDeviceOptions options;
  options.memory_bytes = 4096;
  FakeDevice device(options);
  auto a = device.Allocate(3000);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(device.Allocate(2000).status().code(), absl::StatusCode::kResourceExhausted);
  device.Free(*a);
  auto b = device.Allocate(4096);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(device.Stats().allocated_bytes, 4096);
  EXPECT_EQ(device.Stats().peak_allocated_bytes, 4096);
  device.Free(*b);
  EXPECT_EQ(device.Stats().allocated_bytes, 0);
}

TEST(FakeDeviceTest, CopiesNeedPinnedSourcesAndDeviceDestinations) {
  FakeDevice device;
  auto dst = device.Allocate(1024);
  ASSERT_TRUE(dst.ok());
  std::vector<uint8_t> pageable(1024, 7);
  EXPECT_EQ(device.CopyToDevice(Stream::kCopy, *dst, pageable.data(), 1024).code(),
            absl::StatusCode::kInvalidArgument);
  auto pinned = device.AllocatePinned(1024);
  ASSERT_TRUE(pinned.ok());
  std::memset(*pinned, 7, 1024);
  EXPECT_EQ(device.CopyToDevice(Stream::kCopy, *dst + 512, *pinned, 1024).code(),
            absl::StatusCode::kInvalidArgument);  // Runs past the allocation.
  ASSERT_TRUE(device.CopyToDevice(Stream::kCopy, *dst, *pinned, 1024).ok());
  std::vector<uint8_t> back(1024, 0);
  ASSERT_TRUE(device.CopyToHost(Stream::kCopy, back.data(), *dst, 1024).ok());
  ASSERT_TRUE(device.StreamSynchronize(Stream::kCopy).ok());
  EXPECT_EQ(back, pageable);
  EXPECT_EQ(device.Stats().h2d_bytes, 1024);
  EXPECT_EQ(device.Stats().d2h_bytes, 1024);
}

TEST(FakeDeviceTest, EventsOrderTheStreamsInRealityAndOnTheTimeline) {
  FakeDeviceOptions options;
  options.copy_latency_seconds = 0;
  options.h2d_bytes_per_second = 1e6;  // 1 MB: 1 simulated second.
  options.d2h_bytes_per_second = 1e6;
  options.real_copy_delay_seconds = 0.02;  // The copy really lands late.
  FakeDevice device(options);
  const uint64_t n = 1000000;
  auto buffer = device.Allocate(n);
  auto pinned = device.AllocatePinned(n);
  auto copied = device.CreateEvent();
  ASSERT_TRUE(buffer.ok() && pinned.ok() && copied.ok());
  std::memset(*pinned, 42, n);
  ASSERT_TRUE(device.CopyToDevice(Stream::kCopy, *buffer, *pinned, n).ok());
  ASSERT_TRUE(device.Record(*copied, Stream::kCopy).ok());
  // The compute stream reads the buffer only after the copy.
  ASSERT_TRUE(device.StreamWait(Stream::kCompute, *copied).ok());
  std::vector<uint8_t> back(n, 0);
  ASSERT_TRUE(device.CopyToHost(Stream::kCompute, back.data(), *buffer, n).ok());
  ASSERT_TRUE(device.StreamSynchronize(Stream::kCompute).ok());
  EXPECT_EQ(back, std::vector<uint8_t>(n, 42));
  const std::vector<TimelineEntry> timeline = device.Timeline();
  ASSERT_EQ(timeline.size(), 3u);  // h2d, the compute stream's wait, d2h.
  EXPECT_EQ(timeline[0].kind, "h2d");
  EXPECT_DOUBLE_EQ(timeline[0].end, 1.0);
  EXPECT_EQ(timeline[1].kind, "wait");
  EXPECT_EQ(timeline[1].stream, Stream::kCompute);
  EXPECT_DOUBLE_EQ(timeline[2].start, 1.0);
  EXPECT_DOUBLE_EQ(device.Stats().stream_wait_seconds[0], 1.0);
  EXPECT_DOUBLE_EQ(device.host_seconds(), 2.0);
  // An event never recorded is complete.
  auto fresh = device.CreateEvent();
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(device.EventSynchronize(*fresh).ok());
}

TEST(FakeDeviceTest, MatMulRunsTheCpuKernelsOnDeviceMemory) {
  FakeDevice device;
  const int64_t rows = 8, cols = 256, batch = 3;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> w(rows * cols), x(batch * cols);
  for (float& v : w) v = normal(rng);
  for (float& v : x) v = normal(rng);
  const int64_t row_bytes = kernels::RowBytes(kernels::WeightType::kQ4_K, cols);
  std::vector<uint8_t> q(rows * row_bytes);
  for (int64_t r = 0; r < rows; ++r) {
    kernels::QuantizeRow(kernels::WeightType::kQ4_K, &w[r * cols], &q[r * row_bytes], cols);
  }
  auto pinned = device.AllocatePinned(q.size() + x.size() * 4);
  auto dw = device.Allocate(q.size());
  auto dx = device.Allocate(x.size() * 4);
  auto dy = device.Allocate(batch * rows * 4);
  ASSERT_TRUE(pinned.ok() && dw.ok() && dx.ok() && dy.ok());
  uint8_t* stage = static_cast<uint8_t*>(*pinned);
  std::memcpy(stage, q.data(), q.size());
  std::memcpy(stage + q.size(), x.data(), x.size() * 4);
  ASSERT_TRUE(device.CopyToDevice(Stream::kCompute, *dw, stage, q.size()).ok());
  ASSERT_TRUE(device.CopyToDevice(Stream::kCompute, *dx, stage + q.size(), x.size() * 4).ok());
  DeviceMatrix m{kernels::WeightType::kQ4_K, rows, cols, *dw, row_bytes};
  ASSERT_TRUE(device.MatMul(Stream::kCompute, m, *dx, cols, batch, *dy, rows).ok());
  std::vector<float> y(batch * rows), want(batch * rows);
  ASSERT_TRUE(device.CopyToHost(Stream::kCompute, y.data(), *dy, y.size() * 4).ok());
  ASSERT_TRUE(device.StreamSynchronize(Stream::kCompute).ok());
  kernels::Scratch scratch(kernels::MatVecScratchBytes(m.type, cols, batch));
  ASSERT_TRUE(kernels::MatMul(kernels::DenseWeightView(m.type, rows, cols, q.data()), x.data(),
                              cols, batch, want.data(), rows, nullptr, &scratch)
                  .ok());
  EXPECT_EQ(y, want);
  EXPECT_EQ(device.Stats().matmuls, 1);

  // Rows that are not whole blocks are refused, as CudaDevice refuses them.
  m.cols = cols - 32;
  EXPECT_EQ(device.MatMul(Stream::kCompute, m, *dx, cols, 1, *dy, rows).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace waste::gpu
