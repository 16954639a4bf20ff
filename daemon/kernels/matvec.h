// Matrix-vector and small-batch matrix products on weights in their GGUF
// encoding, read in place.
//
//   y[r] = dot(row r of w, x)                    (MatVec, decode)
//   y[b][r] = dot(row r of w, x[b]), b < batch   (MatMul, prefill)
//
// The quantized types dot with an int8-quantized copy of x (QuantizedActs,
// blocks of 32, f32 scales), as llama.cpp does: the weights never get
// expanded to f32, so the loop stays bound by memory bandwidth. F32, F16 and
// BF16 weights dot with x in f32. The oracle in the tests is
// DequantizeRow + an f32 dot; each ISA's result is within the bound that the
// activation rounding implies (|x - d*q| <= d/2 per element).
//
// matvec.cc validates shapes once and dispatches to the family chosen by
// DetectIsa(); matvec_{scalar,avx2,avx512}.cc hold the loops.
#ifndef WASTE_DAEMON_KERNELS_MATVEC_H_
#define WASTE_DAEMON_KERNELS_MATVEC_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/status.h"
#include "daemon/kernels/cpu_features.h"
#include "daemon/kernels/quant_blocks.h"
#include "daemon/kernels/thread_pool.h"

namespace waste::kernels {

// How a matrix's rows sit in memory.
enum class WeightLayout : uint8_t {
  kRows,  // GGUF's: row r at data + r * row_stride_bytes.
  // Repacked once at load for the CPU loops (InterleaveRows): each group of
  // kInterleaveRows rows keeps its bytes, but per 256 columns (8 blocks) each
  // row's 8 f16 scales come first, then its 8 blocks' quants back to back,
  // and the group's rows take turns unit by unit, so that the loops read the
  // scales with one load and the quants with no byte permutes, and a group's
  // rows stream from one run of memory. Rows past the last whole group keep
  // the kRows layout. Only where CanInterleave; never seen by a device.
  // Q4_K's unit is its super-block, as GGUF has it.
  kInterleaved,
  // Q4_0, Q4_K, IQ4_NL, IQ4_XS, MXFP4: as kInterleaved (IQ4_NL as Q4_0,
  // IQ4_XS as Q4_K: its super-block's header first; MXFP4 its 8 exponents
  // first), with each unit's codes put in the
  // order of the tiled AVX2 loops (see LaneCodeByte and Q4KLaneElem in
  // matvec_internal.h), which then need no transposes; the AVX-512 loops
  // permute them back.
  kInterleavedLanes,
};

// Rows per group of the kInterleaved layout.
inline constexpr int kInterleaveRows = 4;

// A weight matrix in place: `rows` rows of `cols` elements of `type`, row r
// at data + r * row_stride_bytes (kRows). Borrowed, never owned.
struct WeightView {
  WeightType type = WeightType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;
  int64_t row_stride_bytes = 0;  // >= RowBytes(type, cols); kInterleaved: ==.
  WeightLayout layout = WeightLayout::kRows;
};

// Whether a dense matrix of `type` and `cols` may take `layout`
// (kInterleaved: Q4_0, Q8_0 and Q4_K; kInterleavedLanes: Q4_0, Q4_K, IQ4_NL,
// IQ4_XS and MXFP4), cols a multiple of 256.
bool CanInterleave(WeightType type, int64_t cols, WeightLayout layout = WeightLayout::kInterleaved);

// The interleaved layout the loops of `isa` read fastest for `type`.
WeightLayout InterleavedLayoutFor(WeightType type, Isa isa);

// The layout a resident dense matrix takes for the loops of `isa`: its
// InterleavedLayoutFor where it can interleave and that measured faster than
// the rows as GGUF has them, else kRows (see interleave.cc).
WeightLayout ResidentLayoutFor(WeightType type, int64_t cols, Isa isa);

// Rewrites a dense kRows matrix (CanInterleave) into `layout` in place; the
// products of its view in that layout are bit-identical to those of its
// kRows view on every ISA. The same size: the bytes only move.
void InterleaveRows(WeightType type, int64_t rows, int64_t cols, void* data,
                    WeightLayout layout = WeightLayout::kInterleaved);

// How far ahead of the bytes being decoded the SIMD loops prefetch the
// weight stream (public so that a probe of the machine, wasted bench's
// memory read, reads the way they do). The hardware prefetchers alone left
// the 1 GiB decode at ~60% of the machine's read bandwidth. 2 KiB ahead (the first setting)
// covers ~100 ns at one core's ~29 GB/s; with both cores streaming, and
// under other processes' load, misses take longer: streaming 256 MiB on 2
// threads (matvec_bench --cache_kib=262144 --cpu_threads=2, CPU time, 3
// runs each on a loaded machine), 6 KiB gave the best median for Q4_0, Q4_K
// and Q8_0 on both ISAs (AVX-512 Q4_0 51.9 vs 48.0 GB/s, Q4_K 44.0 vs 39.9,
// Q8_0 61.1 vs 53.9; AVX2 Q4_0 37.1 vs 35.4, Q8_0 43.5 vs 37.2), 8 and
// 12 KiB no better. A third sweep, under heavier load, did not separate 0,
// 2 and 6 KiB: confirm on a quiet machine. Rows are usually contiguous, so
// this runs into the next rows; a prefetch past the matrix is harmless.
#ifndef WASTE_MATVEC_PREFETCH
#define WASTE_MATVEC_PREFETCH 6144
#endif
inline constexpr int kPrefetchBytes = WASTE_MATVEC_PREFETCH;

// A contiguous row-major view (stride = RowBytes(type, cols)).
WeightView DenseWeightView(WeightType type, int64_t rows, int64_t cols, const void* data);

// The largest batch MatMul accepts.
inline constexpr int64_t kMaxBatch = 64;

// Which loops a MatMul's rows take where the CPU has a matrix unit
// (MatrixUnitAvailable: AMX-INT8) and it has a loop for the weight type
// (Q8_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS and MXFP4 as GGUF has their rows;
// Q4_0 also kInterleaved): kVector, the vector loops, as on every other machine and type; kMatrix,
// the matrix unit, several times their rate on a prefill's 16 and more activation vectors but not
// on a decode step's one. Its sums round differently (each 32-element block's (Q6_K: 16-element
// part's) integer dot scaled into one f32 accumulator, block after block), so a vector's results
// depend on the path it took, never on the batch or its place in it: callers that promise the same
// results for a token alone and in any batch (the engine's batched sessions) choose the path by
// what the token is (a prompt's or a sampled one), not by the batch's size. Elsewhere kMatrix runs
// the vector loops.
enum class ProductPath : uint8_t { kVector, kMatrix };

// Scratch memory for the quantized activations of one call. Allocate once
// (at model load, sized for the widest matrix and largest batch) and reuse:
// MatVec/MatMul never allocate. Not thread-safe: one call at a time.
class Scratch {
 public:
  Scratch() = default;
  explicit Scratch(size_t bytes);
  size_t bytes() const { return bytes_; }
  void* data() const { return data_.get(); }

 private:
  struct FreeDeleter {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, FreeDeleter> data_;
  size_t bytes_ = 0;
};

// Scratch bytes MatVec/MatMul need for `batch` activation vectors of `cols`
// elements against weights of `type` (0 for F32/F16/BF16), on either path.
size_t MatVecScratchBytes(WeightType type, int64_t cols, int64_t batch = 1);

// y[r] = dot(row r, x) for r < w.rows. x has w.cols floats, y w.rows. `pool`
// may be null (single-threaded). `scratch` may be null for F32/F16/BF16.
// Errors (InvalidArgument) for a cols that is not a whole number of blocks,
// a short stride, null pointers or too little scratch; nothing is written.
absl::Status MatVec(const WeightView& w, const float* x, float* y, ThreadPool* pool,
                    Scratch* scratch);

// y[b * y_stride + r] = dot(row r, x + b * x_stride) for b < batch <= kMaxBatch.
// Each weight row is read from memory once for the whole batch.
absl::Status MatMul(const WeightView& w, const float* x, int64_t x_stride, int64_t batch, float* y,
                    int64_t y_stride, ThreadPool* pool, Scratch* scratch,
                    ProductPath path = ProductPath::kVector);

// One matrix of a MatMulShared call and where its results go:
// y[b * y_stride + r] for its rows r.
struct SharedProduct {
  WeightView w;
  float* y = nullptr;
  int64_t y_stride = 0;
};

// The most matrices one MatMulShared call takes.
inline constexpr int kMaxSharedProducts = 8;

// MatMul of several matrices by the same input (Q, K and V; gate and up):
// each y is to the bit what MatMul of its matrix gives, but the input is
// quantized once for every run of consecutive matrices of one type, and the
// rows of a run go to the pool as one parallel loop, so the small matrices
// (K and V of grouped-query attention) do not each pay a loop's start and
// tail. Every matrix has x's cols. Errors as MatMul (and for more than
// kMaxSharedProducts matrices); nothing is written then.
absl::Status MatMulShared(std::span<const SharedProduct> products, const float* x, int64_t x_stride,
                          int64_t batch, ThreadPool* pool, Scratch* scratch,
                          ProductPath path = ProductPath::kVector);
absl::Status MatMulSharedOnIsa(Isa isa, std::span<const SharedProduct> products, const float* x,
                               int64_t x_stride, int64_t batch, ThreadPool* pool, Scratch* scratch,
                               ProductPath path = ProductPath::kVector);

// One matrix of a MatMulEach call with its own input and output:
// y[b * y_stride + r] = dot(row r, x + b * x_stride).
struct OwnProduct {
  WeightView w;
  const float* x = nullptr;
  float* y = nullptr;
};

// The most matrices one MatMulEach loop takes.
inline constexpr int kMaxEachProducts = 256;

// MatMul of many small matrices of one type and width, each by its own
// input (the per-head products of MLA's attn_k_b and attn_v_b; the routed
// experts of a MoE layer), all with x_stride, y_stride and batch: each y is
// to the bit what MatMul of its matrix and input gives, but the rows of as
// many products as `scratch` holds the quantized inputs of (at least one;
// all of them for a decode step), up to kMaxEachProducts, go to the pool as
// one parallel loop instead of a loop each. Neighbouring products with the
// same x (an expert's gate and up) share one quantized copy of it. Errors as
// MatMul, and for products of different types or widths; nothing is written
// then.
absl::Status MatMulEach(std::span<const OwnProduct> products, int64_t x_stride, int64_t y_stride,
                        int64_t batch, ThreadPool* pool, Scratch* scratch);
absl::Status MatMulEachOnIsa(Isa isa, std::span<const OwnProduct> products, int64_t x_stride,
                             int64_t y_stride, int64_t batch, ThreadPool* pool, Scratch* scratch);

// As MatMul, on an explicit family (tests and benchmarks compare them); `isa`
// must be one that SupportedIsas() lists (CHECKed).
absl::Status MatMulOnIsa(Isa isa, const WeightView& w, const float* x, int64_t x_stride,
                         int64_t batch, float* y, int64_t y_stride, ThreadPool* pool,
                         Scratch* scratch, ProductPath path = ProductPath::kVector);

}  // namespace waste::kernels

#endif  // WASTE_DAEMON_KERNELS_MATVEC_H_
