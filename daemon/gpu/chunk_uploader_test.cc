// Copy scheduling on the fake device: chunks arrive intact through small
// and large staging, a copy never overwrites a slot still being computed
// on, the copy of layer l+1 overlaps the compute of layer l, the device
// memory stays within the slots, and the stats count what happened.
#include "daemon/gpu/chunk_uploader.h"

#include <cstring>
#include <random>
#include <vector>

#include "daemon/gpu/fake_device.h"
#include "daemon/kernels/matvec.h"
#include "daemon/kernels/quantize.h"
#include "gtest/gtest.h"

namespace waste::gpu {
namespace {

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(n);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

// Reads `bytes` of device memory at `ptr` after the compute stream's work.
std::vector<uint8_t> ReadBack(Device* device, DevicePtr ptr, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  EXPECT_TRUE(device->CopyToHost(Stream::kCompute, out.data(), ptr, bytes).ok());
  EXPECT_TRUE(device->StreamSynchronize(Stream::kCompute).ok());
  return out;
}

TEST(ChunkUploaderTest, ChunksArriveIntactThroughSmallStaging) {
  FakeDeviceOptions options;
  options.real_copy_delay_seconds = 0.002;  // Copies land late: hazards would show.
  FakeDevice device(options);
  ChunkUploaderOptions o;
  o.slots = 2;
  o.slot_bytes = 10000;
  o.staging_bytes = 1536;  // Each chunk goes up in several pieces.
  auto uploader = ChunkUploader::Create(&device, o);
  ASSERT_TRUE(uploader.ok()) << uploader.status();
  for (int i = 0; i < 6; ++i) {
    const std::vector<uint8_t> chunk = RandomBytes(3000 + 1000 * i, i);
    auto slot = (*uploader)->Upload(i, chunk.data(), chunk.size());
    ASSERT_TRUE(slot.ok()) << slot.status();
    auto ptr = (*uploader)->Use(*slot);
    ASSERT_TRUE(ptr.ok()) << ptr.status();
    EXPECT_EQ(ReadBack(&device, *ptr, chunk.size()), chunk) << "chunk " << i;
    ASSERT_TRUE((*uploader)->Done(*slot).ok());
  }
  EXPECT_EQ((*uploader)->stats().uploads, 6);
  EXPECT_EQ((*uploader)->stats().h2d_bytes, 6 * 3000 + 15 * 1000);
  // Pieces of at most 1536 bytes: ceil(3000/1536) + ... + ceil(8000/1536).
  EXPECT_EQ(device.Stats().h2d_copies, 2 + 3 + 4 + 4 + 5 + 6);
}

TEST(ChunkUploaderTest, StaysWithinItsSlotsAndRefusesWhatDoesNotFit) {
  FakeDeviceOptions options;
  options.memory_bytes = 2 * 4096;
  FakeDevice device(options);
  ChunkUploaderOptions o;
  o.slots = 3;
  o.slot_bytes = 4096;
  EXPECT_EQ(ChunkUploader::Create(&device, o).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(device.Stats().allocated_bytes, 0);  // What it had allocated is freed.
  o.slots = 2;
  auto uploader = ChunkUploader::Create(&device, o);
  ASSERT_TRUE(uploader.ok()) << uploader.status();
  EXPECT_EQ((*uploader)->device_bytes(), 8192u);
  const std::vector<uint8_t> big = RandomBytes(5000, 1), small = RandomBytes(100, 2);
  EXPECT_EQ((*uploader)->Upload(0, big.data(), big.size()).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto a = (*uploader)->Upload(1, small.data(), small.size());
  auto b = (*uploader)->Upload(2, small.data(), small.size());
  ASSERT_TRUE(a.ok() && b.ok());
  // Both slots loaded and not yet used: no room for a third chunk.
  EXPECT_EQ((*uploader)->Upload(3, small.data(), small.size()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*uploader)->Done(*a).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_LE(device.Stats().peak_allocated_bytes, 8192);
}

TEST(ChunkUploaderTest, AChunkStillInASlotIsNotCopiedAgain) {
  FakeDevice device;
  ChunkUploaderOptions o;
  o.slot_bytes = 4096;
  auto uploader = ChunkUploader::Create(&device, o);
  ASSERT_TRUE(uploader.ok());
  const std::vector<uint8_t> chunk = RandomBytes(4096, 3);
  auto slot = (*uploader)->Upload(7, chunk.data(), chunk.size());
  ASSERT_TRUE(slot.ok());
  ASSERT_TRUE((*uploader)->Use(*slot).ok());
  ASSERT_TRUE((*uploader)->Done(*slot).ok());
  auto again = (*uploader)->Upload(7, chunk.data(), chunk.size());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *slot);
  EXPECT_EQ((*uploader)->stats().uploads, 1);
  EXPECT_EQ((*uploader)->stats().reuses, 1);
  EXPECT_EQ(device.Stats().h2d_copies, 1);
}

// A layer loop as model/ drives it: compute layer l on its uploaded weights,
// then upload layer l+1 while l computes.
class PipelineTest : public ::testing::Test {
 protected:
  static constexpr int kLayers = 6;
  static constexpr int64_t kRows = 64, kCols = 512;
  static constexpr kernels::WeightType kType = kernels::WeightType::kQ8_0;

  void SetUp() override {
    std::mt19937 rng(5);
    std::normal_distribution<float> normal;
    row_bytes_ = kernels::RowBytes(kType, kCols);
    for (int l = 0; l < kLayers; ++l) {
      std::vector<float> w(kRows * kCols);
      for (float& v : w) v = normal(rng);
      layers_.emplace_back(kRows * row_bytes_);
      for (int64_t r = 0; r < kRows; ++r) {
        kernels::QuantizeRow(kType, &w[r * kCols], &layers_[l][r * row_bytes_], kCols);
      }
    }
    x_.resize(kCols);
    for (float& v : x_) v = normal(rng);
  }

  // Runs the loop on a device with these copy/compute costs; checks every
  // layer's product against the CPU kernels.
  void RunLoop(FakeDevice* device) {
    ChunkUploaderOptions o;
    o.slots = 2;
    o.slot_bytes = kRows * row_bytes_;
    auto uploader = ChunkUploader::Create(device, o);
    ASSERT_TRUE(uploader.ok()) << uploader.status();
    auto pinned = device->AllocatePinned(kCols * 4);
    auto dx = device->Allocate(kCols * 4);
    auto dy = device->Allocate(kLayers * kRows * 4);
    ASSERT_TRUE(pinned.ok() && dx.ok() && dy.ok());
    std::memcpy(*pinned, x_.data(), kCols * 4);
    ASSERT_TRUE(device->CopyToDevice(Stream::kCompute, *dx, *pinned, kCols * 4).ok());
    ASSERT_TRUE(device->StreamSynchronize(Stream::kCompute).ok());
    const double start = device->host_seconds();

    auto slot = (*uploader)->Upload(0, layers_[0].data(), layers_[0].size());
    ASSERT_TRUE(slot.ok()) << slot.status();
    for (int l = 0; l < kLayers; ++l) {
      auto w = (*uploader)->Use(*slot);
      ASSERT_TRUE(w.ok()) << w.status();
      device->Label(Stream::kCompute, "layer " + std::to_string(l));
      DeviceMatrix m{kType, kRows, kCols, *w, row_bytes_};
      ASSERT_TRUE(
          device->MatMul(Stream::kCompute, m, *dx, kCols, 1, *dy + l * kRows * 4, kRows).ok());
      ASSERT_TRUE((*uploader)->Done(*slot).ok());
      if (l + 1 < kLayers) {
        slot = (*uploader)->Upload(l + 1, layers_[l + 1].data(), layers_[l + 1].size());
        ASSERT_TRUE(slot.ok()) << slot.status();
      }
    }
    std::vector<float> y(kLayers * kRows);
    ASSERT_TRUE(device->CopyToHost(Stream::kCompute, y.data(), *dy, y.size() * 4).ok());
    ASSERT_TRUE(device->StreamSynchronize(Stream::kCompute).ok());
    elapsed_ = device->host_seconds() - start;
    kernels::Scratch scratch(kernels::MatVecScratchBytes(kType, kCols, 1));
    for (int l = 0; l < kLayers; ++l) {
      std::vector<float> want(kRows);
      ASSERT_TRUE(kernels::MatMul(kernels::DenseWeightView(kType, kRows, kCols, layers_[l].data()),
                                  x_.data(), kCols, 1, want.data(), kRows, nullptr, &scratch)
                      .ok());
      EXPECT_EQ(std::vector<float>(y.begin() + l * kRows, y.begin() + (l + 1) * kRows), want)
          << "layer " << l;
    }
    stats_ = (*uploader)->stats();
    device->Free(*dx);
    device->Free(*dy);
    device->FreePinned(*pinned);
  }

  // The timeline's copy and product of each layer.
  struct Layer {
    TimelineEntry copy, compute;
  };
  static std::vector<Layer> Layers(const std::vector<TimelineEntry>& timeline) {
    std::vector<Layer> out(kLayers);
    for (const TimelineEntry& e : timeline) {
      for (int l = 0; l < kLayers; ++l) {
        if (e.kind == "h2d" && e.label == "chunk " + std::to_string(l)) out[l].copy = e;
        if (e.kind == "matmul" && e.label == "layer " + std::to_string(l)) out[l].compute = e;
      }
    }
    return out;
  }

  int64_t row_bytes_ = 0;
  std::vector<std::vector<uint8_t>> layers_;
  std::vector<float> x_;
  double elapsed_ = 0;
  ChunkUploaderStats stats_;
};

TEST_F(PipelineTest, CopyOfTheNextLayerOverlapsComputeOfThisOne) {
  FakeDeviceOptions options;
  const double bytes = kRows * kernels::RowBytes(kType, kCols);
  options.copy_latency_seconds = 0;
  options.matmul_latency_seconds = 0;
  options.h2d_bytes_per_second = bytes / 1.0;     // A copy: 1 s.
  options.memory_bytes_per_second = bytes / 0.8;  // A product: 0.8 s.
  options.real_copy_delay_seconds = 0.001;
  FakeDevice device(options);
  RunLoop(&device);
  const std::vector<Layer> layers = Layers(device.Timeline());
  for (int l = 0; l < kLayers; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    // Compute waits for its weights.
    EXPECT_GE(layers[l].compute.start, layers[l].copy.end);
    if (l + 1 < kLayers) {
      // The next layer's copy runs during this layer's compute.
      EXPECT_LT(layers[l + 1].copy.start, layers[l].compute.end);
      EXPECT_GT(layers[l + 1].copy.end, layers[l].compute.start);
      EXPECT_EQ(layers[l + 1].copy.stream, Stream::kCopy);
    }
    if (l + 2 < kLayers) {
      // Double buffering: l+2 lands in l's slot only after l's compute.
      EXPECT_GE(layers[l + 2].copy.start, layers[l].compute.end);
    }
  }
  // Copy-bound: 6 copies of 1 s and the last product, not 6 x 1.8 s.
  EXPECT_NEAR(elapsed_, 6.8, 0.01);
  // The compute stream waited 1 s for the first layer and 0.2 s for each
  // later one (copy 1 s, product 0.8 s).
  EXPECT_NEAR(device.Stats().stream_wait_seconds[static_cast<int>(Stream::kCompute)], 1.0 + 5 * 0.2,
              1e-9);
  EXPECT_EQ(stats_.uploads, kLayers);
  EXPECT_EQ(stats_.h2d_bytes, kLayers * static_cast<int64_t>(bytes));
}

TEST_F(PipelineTest, ComputeBoundLoopWaitsOnlyForTheFirstCopy) {
  FakeDeviceOptions options;
  const double bytes = kRows * kernels::RowBytes(kType, kCols);
  options.copy_latency_seconds = 0;
  options.matmul_latency_seconds = 0;
  options.h2d_bytes_per_second = bytes / 0.5;     // A copy: 0.5 s.
  options.memory_bytes_per_second = bytes / 1.0;  // A product: 1 s.
  FakeDevice device(options);
  RunLoop(&device);
  EXPECT_NEAR(elapsed_, 0.5 + 6 * 1.0, 0.01);
  EXPECT_NEAR(device.Stats().stream_wait_seconds[static_cast<int>(Stream::kCompute)], 0.5, 1e-9);
  // The copy stream waits for the slot's previous compute instead.
  EXPECT_GT(device.Stats().stream_wait_seconds[static_cast<int>(Stream::kCopy)], 0);
}

}  // namespace
}  // namespace waste::gpu
