// Products of quantized weight matrices with f32 activations on the GPU:
// y[b][r] = dot(row r of W, x[b]) for the types DeviceComputes() lists:
// every type of the CPU's: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4 and the codebook types IQ1_S,
// IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S (their grids in device
// memory: SetIqTables).
//
// The block layouts are ggml's (daemon/kernels/quant_blocks.h, mirrored
// below by byte offsets; the device test checks every type against the CPU
// dequantizer). Activations stay f32 (no int8 rounding as on the CPU), so
// results match the dequantized f32 dot to float rounding (elements are
// dequantized in ggml's order of products, (d * scale) * code, as the CPU's
// DequantizeRow; nvcc may contract a multiply-add into one rounding).
//
// Two kernels, a warp per weight row or a few rows, a warp shuffle summing
// the lanes:
//  - MatMulGroupKernel, for the block types and F16/BF16: each lane takes 8 consecutive
//    elements at a time, decoding their sub-block's scale once, with the
//    activations as float4 loads (Q4_K and Q5_K headers as words and codes
//    as 8-byte loads where rows are 16-byte aligned), two or four rows per
//    warp for one vector (RowsPerWarp1) and four for a batch. On an H200
//    (cuda_device_test's ProductThroughput, 4096 columns, 65536 rows): Q4_K
//    854 GB/s of weights for one vector and 436 for 8, Q8_0 1633, IQ4_NL
//    736, F16 and BF16 3.4 TB/s (946 GB/s element by element); for 8
//    vectors 290-600, F16 1250.
//  - MatMulKernel, the plain first kernel (every lane one element at a
//    time, its block's scale decoded again for each): F32, and the other
//    types with WASTE_CUDA_ELEMENTWISE=1 or unaligned activations (or
//    unaligned F16/BF16 rows). Q4_K 136 GB/s, F32 2.3 TB/s.
// Neither is near the HBM's 4.8 TB/s for the block types: the next step is
// int8 activations with dp4a and wider weight loads, as ggml's mmvq does.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "daemon/gpu/cuda/cuda_api.h"

namespace waste::gpu::cuda_api {
namespace {

#include "daemon/gpu/cuda/quant_decode.cuh"

constexpr int kWarpsPerBlock = 4;
constexpr int kBatchTile = 8;
// MatMulGroupKernel's default prefetch distance, in steps of 256 elements,
// and rows per warp for one vector. On an H200 (ProductThroughput, GB/s of
// weights, one vector), one row per warp without prefetch: Q4_K 508, Q8_0
// 1013, Q4_0 536, Q6_K 647, IQ4_XS 455; two rows (each activation load serves
// both), prefetching 4 steps: 730, 1633, 820, 838, 505; four rows: Q4_K 854,
// IQ4_XS 594, the others less than with two. The 7B-shaped Q4_K model's
// decode: 65.6 tok/s with one row, 83.0 with two, 85.3 with four.
// (Prefetch alone: +0-8 %.)
constexpr int kPrefetchSteps = 4;

// (Of the type, or of its word-reading variant: 1000 + the type.)
__host__ __device__ constexpr int RowsPerWarp1(uint32_t type) {
  return type % 1000 == kQ4_K || type == kIQ4_XS ? 4 : 2;
}

// Asks L2 for the 32-byte sector at p (no register waits on it).
__device__ __forceinline__ void PrefetchL2(const uint8_t* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// As MatMulKernel, with each lane taking a group of 8 consecutive elements
// at a time (a warp covers 256 elements, one K-quant block or eight 32-
// blocks, per step), so a group's scale is decoded once and its codes come
// from consecutive bytes; the group's activations come as two float4 loads
// (x and x_stride 16-byte aligned: the launch checks) and serve the warp's
// kRows consecutive weight rows. For the block types, whose rows are whole
// groups.
//
// `ahead` > 0: each step first asks L2 for the warp's rows' bytes `ahead`
// steps further on (a lane per 32-byte sector), so that more of the rows is
// in flight than the one step a warp waits on.
template <uint32_t kType, int kRows>
__global__ void MatMulGroupKernel(int64_t rows, int64_t cols, const uint8_t* __restrict__ w,
                                  int64_t row_stride, const float* __restrict__ x, int64_t x_stride,
                                  int64_t batch, float* __restrict__ y, int64_t y_stride,
                                  int ahead) {
  constexpr int kStep = StepBytes(kType);
  static_assert(kStep > 0 && kStep <= 32 * 32);
  const int lane = threadIdx.x & 31;
  const int64_t r0 =
      (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5)) * kRows;
  if (r0 >= rows) return;
  const int nr = static_cast<int>(rows - r0 < kRows ? rows - r0 : kRows);
  const int64_t b0 = static_cast<int64_t>(blockIdx.y) * kBatchTile;
  const int nb = static_cast<int>(batch - b0 < kBatchTile ? batch - b0 : kBatchTile);
  float acc[kRows][kBatchTile];
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
#pragma unroll
    for (int b = 0; b < kBatchTile; ++b) acc[i][b] = 0.f;
  }
  // The step at element `at` of each row, a sector per lane.
  auto prefetch = [&](int64_t at) {
    if (at < cols && 32 * lane < kStep) {
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        if (i < nr) PrefetchL2(w + (r0 + i) * row_stride + at / 256 * kStep + 32 * lane);
      }
    }
  };
  for (int s = 1; s < ahead; ++s) prefetch(256 * static_cast<int64_t>(s));
  for (int64_t e0 = 8 * lane; e0 < cols; e0 += 256) {
    if (ahead > 0) prefetch(e0 - 8 * lane + 256 * static_cast<int64_t>(ahead));
    float v[kRows][8];
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      // A missing last row decodes row r0 again and is never stored.
      Group8<kType>(w + (r0 + (i < nr ? i : 0)) * row_stride, e0, v[i]);
    }
#pragma unroll
    for (int b = 0; b < kBatchTile; ++b) {
      if (b < nb) {
        const float4* xb = reinterpret_cast<const float4*>(x + (b0 + b) * x_stride + e0);
        const float4 lo = xb[0], hi = xb[1];
#pragma unroll
        for (int i = 0; i < kRows; ++i) {
          acc[i][b] += v[i][0] * lo.x + v[i][1] * lo.y + v[i][2] * lo.z + v[i][3] * lo.w +
                       v[i][4] * hi.x + v[i][5] * hi.y + v[i][6] * hi.z + v[i][7] * hi.w;
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
#pragma unroll
    for (int b = 0; b < kBatchTile; ++b) {
      float sum = acc[i][b];
      for (int offset = 16; offset > 0; offset >>= 1) {
        sum += __shfl_down_sync(0xffffffffu, sum, offset);
      }
      if (lane == 0 && b < nb && i < nr) y[(b0 + b) * y_stride + r0 + i] = sum;
    }
  }
}

template <uint32_t kType>
__global__ void MatMulKernel(int64_t rows, int64_t cols, const uint8_t* __restrict__ w,
                             int64_t row_stride, const float* __restrict__ x, int64_t x_stride,
                             int64_t batch, float* __restrict__ y, int64_t y_stride) {
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= rows) return;
  const int64_t b0 = static_cast<int64_t>(blockIdx.y) * kBatchTile;
  const int nb = static_cast<int>(batch - b0 < kBatchTile ? batch - b0 : kBatchTile);
  const uint8_t* row = w + r * row_stride;
  float acc[kBatchTile];
#pragma unroll
  for (int b = 0; b < kBatchTile; ++b) acc[b] = 0.f;
  for (int64_t e = lane; e < cols; e += 32) {
    const float v = Element<kType>(row, e);
#pragma unroll
    for (int b = 0; b < kBatchTile; ++b) {
      if (b < nb) acc[b] += v * x[(b0 + b) * x_stride + e];
    }
  }
#pragma unroll
  for (int b = 0; b < kBatchTile; ++b) {
    float sum = acc[b];
    for (int offset = 16; offset > 0; offset >>= 1) {
      sum += __shfl_down_sync(0xffffffffu, sum, offset);
    }
    if (lane == 0 && b < nb) y[(b0 + b) * y_stride + r] = sum;
  }
}

// Whether the block types use the per-element kernel: WASTE_CUDA_ELEMENTWISE
// set and not "0" (the plain first kernel, kept to compare against; read at
// each launch, which costs far less than the launch).
bool Elementwise() {
  const char* v = std::getenv("WASTE_CUDA_ELEMENTWISE");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

// An integer setting from the environment, or `otherwise`.
int EnvInt(const char* name, int otherwise) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : otherwise;
}

// The grouped kernel: RowsPerWarp1 rows per warp for a single vector
// (WASTE_CUDA_ROWS1=1, 2 or 4 instead); four for a batch, whose activations
// then serve four rows. WASTE_CUDA_PREFETCH: the steps MatMulGroupKernel
// asks L2 for ahead (0: none; kPrefetchSteps unset).
template <uint32_t kGroupType>
void LaunchGrouped(int64_t rows, int64_t cols, const uint8_t* w, int64_t row_stride, const float* x,
                   int64_t x_stride, int64_t batch, float* y, int64_t y_stride,
                   cudaStream_t stream) {
  // Read once per kernel type, not at each of a token's ~225 launches (the
  // device check's `variants` part sets them per process).
  static const int ahead = EnvInt("WASTE_CUDA_PREFETCH", kPrefetchSteps);
  static const int rows1 = EnvInt("WASTE_CUDA_ROWS1", RowsPerWarp1(kGroupType));
  const unsigned batch_tiles = static_cast<unsigned>((batch + kBatchTile - 1) / kBatchTile);
  auto launch = [&](auto rows_per_warp) {
    constexpr int kRows = decltype(rows_per_warp)::value;
    const dim3 grid(
        static_cast<unsigned>((rows + kWarpsPerBlock * kRows - 1) / (kWarpsPerBlock * kRows)),
        batch_tiles);
    MatMulGroupKernel<kGroupType, kRows><<<grid, 32 * kWarpsPerBlock, 0, stream>>>(
        rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, ahead);
  };
  if (batch > 1) return launch(std::integral_constant<int, 4>());
  switch (rows1) {
    case 1:
      return launch(std::integral_constant<int, 1>());
    case 2:
      return launch(std::integral_constant<int, 2>());
    case 4:
      return launch(std::integral_constant<int, 4>());
    default:
      return launch(std::integral_constant<int, 2>());
  }
}

template <uint32_t kType>
int Launch(int64_t rows, int64_t cols, uint64_t w, int64_t row_stride, uint64_t x, int64_t x_stride,
           int64_t batch, uint64_t y, int64_t y_stride, cudaStream_t stream) {
  constexpr bool kGrouped = kType != kF32;
  // F16 and BF16 rows are read 16 bytes at a time.
  constexpr bool kHalves = kType == kF16 || kType == kBF16;
  const auto* wp = reinterpret_cast<const uint8_t*>(w);
  const auto* xp = reinterpret_cast<const float*>(x);
  auto* yp = reinterpret_cast<float*>(y);
  if constexpr (kGrouped) {
    const bool halves_fit = !kHalves || (w % 16 == 0 && row_stride % 16 == 0 && cols % 8 == 0);
    if (!Elementwise() && halves_fit && x % 16 == 0 && (batch == 1 || x_stride % 4 == 0)) {
      constexpr bool kWords = kType == kQ4_K || kType == kQ5_K;
      if (kWords && w % 16 == 0 && row_stride % 16 == 0) {
        LaunchGrouped<kWords ? 1000 + kType : kType>(rows, cols, wp, row_stride, xp, x_stride,
                                                     batch, yp, y_stride, stream);
      } else {
        LaunchGrouped<kType>(rows, cols, wp, row_stride, xp, x_stride, batch, yp, y_stride, stream);
      }
      return cudaGetLastError();
    }
  }
  const dim3 grid(static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock),
                  static_cast<unsigned>((batch + kBatchTile - 1) / kBatchTile));
  MatMulKernel<kType><<<grid, 32 * kWarpsPerBlock, 0, stream>>>(rows, cols, wp, row_stride, xp,
                                                                x_stride, batch, yp, y_stride);
  return cudaGetLastError();
}

}  // namespace

int SetIqTables(const IqTables& tables) {
  return cudaMemcpyToSymbol(g_iq, &tables, sizeof(tables));
}

int LaunchMatMul(uint32_t type, int64_t rows, int64_t cols, uint64_t w, int64_t row_stride,
                 uint64_t x, int64_t x_stride, int64_t batch, uint64_t y, int64_t y_stride,
                 Handle stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case kF32:
      return Launch<kF32>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kF16:
      return Launch<kF16>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kBF16:
      return Launch<kBF16>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kQ4_0:
      return Launch<kQ4_0>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kQ4_1:
      return Launch<kQ4_1>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kQ5_0:
      return Launch<kQ5_0>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kQ5_1:
      return Launch<kQ5_1>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kQ8_0:
      return Launch<kQ8_0>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kIQ4_NL:
      return Launch<kIQ4_NL>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kIQ4_XS:
      return Launch<kIQ4_XS>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kQ4_K:
      return Launch<kQ4_K>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kQ5_K:
      return Launch<kQ5_K>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kQ6_K:
      return Launch<kQ6_K>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kQ2_K:
      return Launch<kQ2_K>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kQ3_K:
      return Launch<kQ3_K>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kMXFP4:
      return Launch<kMXFP4>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kIQ2_XXS:
      return Launch<kIQ2_XXS>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kIQ2_XS:
      return Launch<kIQ2_XS>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kIQ2_S:
      return Launch<kIQ2_S>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kIQ3_XXS:
      return Launch<kIQ3_XXS>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kIQ3_S:
      return Launch<kIQ3_S>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kIQ1_S:
      return Launch<kIQ1_S>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    case kIQ1_M:
      return Launch<kIQ1_M>(rows, cols, w, row_stride, x, x_stride, batch, y, y_stride, s);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace waste::gpu::cuda_api
