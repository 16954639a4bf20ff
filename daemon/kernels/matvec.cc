#include "daemon/kernels/matvec.h"

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

const IsaKernels& KernelsFor(Isa isa, WeightType type) {
  switch (isa) {
    case Isa::kAvx512:
      return internal::Avx512Kernels();
    case Isa::kAvx2:
      if (const IsaKernels* tiled = internal::Avx2TiledKernels(type)) return *tiled;
      return internal::Avx2Kernels();
    case Isa::kScalar:
      break;
  }
  return internal::ScalarKernels();
}

absl::Status Validate(const WeightView& w, const float* x, int64_t batch, const float* y,
                      Scratch* scratch) {
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
  if (batch < 1 || batch > kMaxBatch) {
    return absl::InvalidArgumentError(
        absl::StrCat("matvec: batch ", batch, " outside [1, ", kMaxBatch, "]"));
  }
  if ((w.rows > 0 && w.cols > 0 && (w.data == nullptr || x == nullptr)) ||
      (w.rows > 0 && y == nullptr)) {
    return absl::InvalidArgumentError("matvec: null weight, input or output");
  }
  const size_t need = MatVecScratchBytes(w.type, w.cols, batch);
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
  if (!UsesQuantizedActivations(type)) return 0;
  return static_cast<size_t>(batch) * (ActsScratchBytes(cols) + sizeof(QuantizedActs) + 64);
}

absl::Status MatVec(const WeightView& w, const float* x, float* y, ThreadPool* pool,
                    Scratch* scratch) {
  return MatMulOnIsa(DetectIsa(), w, x, w.cols, 1, y, w.rows, pool, scratch);
}

absl::Status MatMul(const WeightView& w, const float* x, int64_t x_stride, int64_t batch, float* y,
                    int64_t y_stride, ThreadPool* pool, Scratch* scratch) {
  return MatMulOnIsa(DetectIsa(), w, x, x_stride, batch, y, y_stride, pool, scratch);
}

absl::Status MatMulOnIsa(Isa isa, const WeightView& w, const float* x, int64_t x_stride,
                         int64_t batch, float* y, int64_t y_stride, ThreadPool* pool,
                         Scratch* scratch) {
  if (absl::Status s = Validate(w, x, batch, y, scratch); !s.ok()) return s;
  WCHECK(static_cast<int>(isa) <= static_cast<int>(SupportedIsas().back()))
      << "ISA " << IsaName(isa) << " not supported by this CPU";
  if (w.rows == 0) return absl::OkStatus();
  const IsaKernels& kernels = KernelsFor(isa, w.type);

  RowsTask task;
  task.w = w;
  task.batch = batch;
  task.x = x;
  task.x_stride = x_stride;
  task.y = y;
  task.y_stride = y_stride;
  if (UsesQuantizedActivations(w.type)) {
    // Layout: the QuantizedActs headers first, then each vector's arrays.
    auto* base = static_cast<uint8_t*>(scratch->data());
    auto* headers = reinterpret_cast<QuantizedActs*>(base);
    uint8_t* arrays = base + ((batch * sizeof(QuantizedActs) + 63) & ~size_t{63});
    for (int64_t b = 0; b < batch; ++b) {
      headers[b] = LayoutActs(arrays + b * ActsScratchBytes(w.cols), w.cols);
      kernels.quantize_acts(w.type, x + b * x_stride, w.cols, headers[b]);
    }
    task.acts = headers;
  }
  if (pool == nullptr) {
    kernels.rows(task, 0, w.rows);
  } else {
    pool->ParallelFor(
        w.rows, [&](int64_t begin, int64_t end) { kernels.rows(task, begin, end); },
        MinRowsPerChunk(w));
  }
  return absl::OkStatus();
}

}  // namespace waste::kernels
