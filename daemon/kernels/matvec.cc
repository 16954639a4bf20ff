#include "daemon/kernels/matvec.h"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "daemon/kernels/matvec_internal.h"
#include "daemon/kernels/quantize.h"

namespace waste::kernels {
namespace {

using internal::IsaKernels;
using internal::RowsTask;

// The matrix-unit loops for `type`, where `path` asks for them and this
// machine runs them; else null.
const IsaKernels* MatrixKernelsFor(Isa isa, WeightType type, ProductPath path) {
  if (path != ProductPath::kMatrix || isa != Isa::kAvx512 || !MatrixUnitAvailable()) return nullptr;
  return internal::amx::Kernels(type);
}

const IsaKernels& KernelsFor(Isa isa, WeightType type) {
  switch (isa) {
    case Isa::kAvx512:
      return internal::Avx512Kernels();
    case Isa::kAvxVnni:
      if (const IsaKernels* tiled = internal::avxvnni::TiledKernels(type)) return *tiled;
      return internal::avxvnni::Kernels();
    case Isa::kAvx2:
      if (const IsaKernels* tiled = internal::avx2::TiledKernels(type)) return *tiled;
      return internal::avx2::Kernels();
    case Isa::kScalar:
      break;
  }
  return internal::ScalarKernels();
}

// Scratch bytes of QuantizeBatch's output; the matrix unit's tiles follow.
size_t QuantizedBatchBytes(int64_t cols, int64_t batch) {
  const size_t bytes =
      static_cast<size_t>(batch) * (ActsScratchBytes(cols) + sizeof(QuantizedActs) + 64);
  return (bytes + 63) & ~size_t{63};
}

// Scratch bytes a call on `w.type` needs: its quantized inputs, and the
// matrix unit's tiles where it takes the call (matrix non-null).
size_t ScratchNeed(WeightType type, int64_t cols, int64_t batch, const IsaKernels* matrix) {
  if (!UsesQuantizedActivations(type)) return 0;
  return QuantizedBatchBytes(cols, batch) +
         (matrix != nullptr ? internal::amx::ActsBytes(cols, batch) : 0);
}

absl::Status Validate(const WeightView& w, const float* x, int64_t batch, const float* y,
                      Scratch* scratch, const IsaKernels* matrix = nullptr) {
  const WeightTypeInfo info = GetWeightTypeInfo(w.type);
  if (info.block_elems == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("matvec: unsupported weight type id ", static_cast<uint32_t>(w.type)));
  }
  if (w.rows < 0 || w.cols < 0 || w.cols % info.block_elems != 0 ||
      (info.block_elems > 1 && w.cols % kQK32 != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("matvec: ", std::string(info.name), " matrix of ", w.rows, "x", w.cols,
                     " (cols must be a multiple of ", info.block_elems, ")"));
  }
  if (w.row_stride_bytes < RowBytes(w.type, w.cols)) {
    return absl::InvalidArgumentError(absl::StrCat("matvec: row stride ", w.row_stride_bytes,
                                                   " < row size ", RowBytes(w.type, w.cols)));
  }
  if (w.layout != WeightLayout::kRows && (!CanInterleave(w.type, w.cols, w.layout) ||
                                          w.row_stride_bytes != RowBytes(w.type, w.cols))) {
    return absl::InvalidArgumentError(
        absl::StrCat("matvec: a ", std::string(info.name), " matrix of ", w.cols, " columns and a ",
                     w.row_stride_bytes, "-byte stride cannot be interleaved"));
  }
  if (batch < 1 || batch > kMaxBatch) {
    return absl::InvalidArgumentError(
        absl::StrCat("matvec: batch ", batch, " outside [1, ", kMaxBatch, "]"));
  }
  if ((w.rows > 0 && w.cols > 0 && (w.data == nullptr || x == nullptr)) ||
      (w.rows > 0 && y == nullptr)) {
    return absl::InvalidArgumentError("matvec: null weight, input or output");
  }
  const size_t need = ScratchNeed(w.type, w.cols, batch, matrix);
  if (need > 0 && (scratch == nullptr || scratch->bytes() < need)) {
    return absl::InvalidArgumentError(absl::StrCat("matvec: scratch of ",
                                                   scratch ? scratch->bytes() : 0, " bytes, need ",
                                                   need, " (size it with MatVecScratchBytes)"));
  }
  return absl::OkStatus();
}

// Rows per unit of work: enough that a chunk streams tens of KiB of weights
// (amortizing the scheduling), few enough that 2 threads balance.
int64_t MinRowsPerChunk(const WeightView& w) {
  const int64_t row_bytes = RowBytes(w.type, w.cols) + 1;
  return std::max<int64_t>(1, (16 << 10) / row_bytes);
}

// Quantizes the batch's input vectors for `type` into `base` (64-byte
// aligned, MatVecScratchBytes large): the QuantizedActs headers first, then
// each vector's arrays.
const QuantizedActs* QuantizeBatch(const IsaKernels& kernels, WeightType type, int64_t cols,
                                   const float* x, int64_t x_stride, int64_t batch, uint8_t* base) {
  auto* headers = reinterpret_cast<QuantizedActs*>(base);
  uint8_t* arrays = base + ((batch * sizeof(QuantizedActs) + 63) & ~size_t{63});
  for (int64_t b = 0; b < batch; ++b) {
    headers[b] = LayoutActs(arrays + b * ActsScratchBytes(cols), cols);
    kernels.quantize_acts(type, x + b * x_stride, cols, headers[b]);
  }
  return headers;
}

// The rows of all `tasks` (one weight type and shape) as one range, the
// first task's rows first, run on the pool. Where a task is kInterleaved the
// range is handed out in steps of kInterleaveRows rows and each task starts
// on a step, so that the pool's ranges cut no group; the matrix unit's
// loops take steps of `row_step` (their tiles' rows).
void RunTasks(const IsaKernels& kernels, std::span<const RowsTask> tasks, ThreadPool* pool,
              int64_t row_step = 1) {
  if (tasks.empty()) return;
  int64_t step = row_step;
  for (const RowsTask& t : tasks) {
    if (t.w.layout != WeightLayout::kRows) step = kInterleaveRows;
  }
  WCHECK(tasks.size() <= static_cast<size_t>(kMaxEachProducts)) << tasks.size() << " tasks";
  int64_t starts[kMaxEachProducts + 1];  // Of each task in the range.
  starts[0] = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    starts[i + 1] = (starts[i] + tasks[i].w.rows + step - 1) / step * step;
  }
  auto run = [&](int64_t begin, int64_t end) {
    for (size_t i = 0; i < tasks.size(); ++i) {
      const int64_t first = starts[i];
      const int64_t b = std::max(begin * step, first);
      const int64_t e = std::min(end * step, first + tasks[i].w.rows);
      if (b < e) kernels.rows(tasks[i], b - first, e - first);
    }
  };
  const int64_t steps = starts[tasks.size()] / step;
  if (pool == nullptr) {
    run(0, steps);
  } else {
    pool->ParallelFor(steps, run, (MinRowsPerChunk(tasks.front().w) + step - 1) / step);
  }
}

}  // namespace

void Scratch::FreeDeleter::operator()(void* p) const { std::free(p); }

Scratch::Scratch(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  void* p = std::aligned_alloc(64, (bytes + 63) & ~size_t{63});
  WCHECK(p != nullptr) << "cannot allocate " << bytes << " bytes of kernel scratch";
  data_.reset(p);
}

WeightView DenseWeightView(WeightType type, int64_t rows, int64_t cols, const void* data) {
  return WeightView{type, rows, cols, data, RowBytes(type, cols)};
}

size_t MatVecScratchBytes(WeightType type, int64_t cols, int64_t batch) {
  return ScratchNeed(type, cols, batch, MatrixKernelsFor(DetectIsa(), type, ProductPath::kMatrix));
}

absl::Status MatVec(const WeightView& w, const float* x, float* y, ThreadPool* pool,
                    Scratch* scratch) {
  return MatMulOnIsa(DetectIsa(), w, x, w.cols, 1, y, w.rows, pool, scratch);
}

absl::Status MatMul(const WeightView& w, const float* x, int64_t x_stride, int64_t batch, float* y,
                    int64_t y_stride, ThreadPool* pool, Scratch* scratch, ProductPath path) {
  return MatMulOnIsa(DetectIsa(), w, x, x_stride, batch, y, y_stride, pool, scratch, path);
}

absl::Status MatMulOnIsa(Isa isa, const WeightView& w, const float* x, int64_t x_stride,
                         int64_t batch, float* y, int64_t y_stride, ThreadPool* pool,
                         Scratch* scratch, ProductPath path) {
  const SharedProduct product{w, y, y_stride};
  return MatMulSharedOnIsa(isa, {&product, 1}, x, x_stride, batch, pool, scratch, path);
}

absl::Status MatMulShared(std::span<const SharedProduct> products, const float* x, int64_t x_stride,
                          int64_t batch, ThreadPool* pool, Scratch* scratch, ProductPath path) {
  return MatMulSharedOnIsa(DetectIsa(), products, x, x_stride, batch, pool, scratch, path);
}

absl::Status MatMulSharedOnIsa(Isa isa, std::span<const SharedProduct> products, const float* x,
                               int64_t x_stride, int64_t batch, ThreadPool* pool, Scratch* scratch,
                               ProductPath path) {
  if (products.size() > static_cast<size_t>(kMaxSharedProducts)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "matvec: ", products.size(), " products share an input, at most ", kMaxSharedProducts));
  }
  for (const SharedProduct& p : products) {
    const IsaKernels* matrix = MatrixKernelsFor(isa, p.w.type, path);
    if (absl::Status s = Validate(p.w, x, batch, p.y, scratch, matrix); !s.ok()) return s;
    if (p.w.cols != products.front().w.cols) {
      return absl::InvalidArgumentError(absl::StrCat("matvec: matrices of ", p.w.cols, " and ",
                                                     products.front().w.cols,
                                                     " columns cannot share an input"));
    }
  }
  WCHECK(IsaSupported(isa)) << "ISA " << IsaName(isa) << " not supported by this CPU";
  RowsTask tasks[kMaxSharedProducts];
  for (size_t i = 0; i < products.size();) {
    // A run of one type: one quantized input, one loop.
    const WeightType type = products[i].w.type;
    const int64_t cols = products[i].w.cols;
    const IsaKernels* matrix = MatrixKernelsFor(isa, type, path);
    const IsaKernels& kernels = matrix != nullptr ? *matrix : KernelsFor(isa, type);
    const QuantizedActs* acts = nullptr;
    uint8_t* tiles = nullptr;
    if (UsesQuantizedActivations(type)) {
      auto* base = static_cast<uint8_t*>(scratch->data());
      acts = QuantizeBatch(kernels, type, cols, x, x_stride, batch, base);
      if (matrix != nullptr) {
        tiles = base + QuantizedBatchBytes(cols, batch);
        internal::amx::PrepareActs(acts, batch, cols, tiles);
      }
    }
    int n = 0;
    for (; i < products.size() && products[i].w.type == type; ++i) {
      const SharedProduct& p = products[i];
      if (p.w.rows == 0) continue;
      tasks[n++] = RowsTask{p.w, batch, x, x_stride, acts, p.y, p.y_stride, tiles};
    }
    RunTasks(kernels, {tasks, static_cast<size_t>(n)}, pool,
             matrix != nullptr ? internal::amx::kRowStep : 1);
  }
  return absl::OkStatus();
}

absl::Status MatMulEach(std::span<const OwnProduct> products, int64_t x_stride, int64_t y_stride,
                        int64_t batch, ThreadPool* pool, Scratch* scratch) {
  return MatMulEachOnIsa(DetectIsa(), products, x_stride, y_stride, batch, pool, scratch);
}

absl::Status MatMulEachOnIsa(Isa isa, std::span<const OwnProduct> products, int64_t x_stride,
                             int64_t y_stride, int64_t batch, ThreadPool* pool, Scratch* scratch) {
  if (products.empty()) return absl::OkStatus();
  const WeightView& first = products.front().w;
  for (const OwnProduct& p : products) {
    if (absl::Status s = Validate(p.w, p.x, batch, p.y, scratch); !s.ok()) return s;
    if (p.w.type != first.type || p.w.cols != first.cols) {
      return absl::InvalidArgumentError(
          absl::StrCat("matvec: MatMulEach takes matrices of one type and width, not ",
                       std::string(GetWeightTypeInfo(p.w.type).name), " x ", p.w.cols, " beside ",
                       std::string(GetWeightTypeInfo(first.type).name), " x ", first.cols));
    }
  }
  WCHECK(IsaSupported(isa)) << "ISA " << IsaName(isa) << " not supported by this CPU";
  const IsaKernels& kernels = KernelsFor(isa, first.type);
  const bool quantized = UsesQuantizedActivations(first.type);
  // Each product's quantized inputs take a 64-byte aligned slice of scratch;
  // Validate saw room for one.
  const size_t slice = (MatVecScratchBytes(first.type, first.cols, batch) + 63) & ~size_t{63};
  const size_t slices = quantized ? std::max<size_t>(scratch->bytes() / slice, 1) : 0;
  RowsTask tasks[kMaxEachProducts];
  for (size_t i = 0; i < products.size();) {
    size_t n = 0, used = 0;
    const float* last_x = nullptr;
    const QuantizedActs* last_acts = nullptr;
    for (; i < products.size() && n < static_cast<size_t>(kMaxEachProducts); ++i) {
      const OwnProduct& p = products[i];
      const QuantizedActs* acts = nullptr;
      if (quantized && p.x == last_x) {
        acts = last_acts;  // The neighbour's input: its quantized copy serves.
      } else if (quantized) {
        if (used == slices) break;  // The scratch is full: the loop runs.
        acts = QuantizeBatch(kernels, first.type, first.cols, p.x, x_stride, batch,
                             static_cast<uint8_t*>(scratch->data()) + used++ * slice);
        last_x = p.x;
        last_acts = acts;
      }
      if (p.w.rows > 0) tasks[n++] = RowsTask{p.w, batch, p.x, x_stride, acts, p.y, y_stride};
    }
    RunTasks(kernels, {tasks, n}, pool);
  }
  return absl::OkStatus();
}

}  // namespace waste::kernels
