#include "daemon/gpu/device.h"

#include "absl/strings/str_cat.h"
#include "daemon/kernels/matvec.h"

namespace waste::gpu {

const char* StreamName(Stream stream) { return stream == Stream::kCompute ? "compute" : "copy"; }

bool DeviceComputes(kernels::WeightType type) {
  switch (type) {
    case kernels::WeightType::kF32:
    case kernels::WeightType::kF16:
    case kernels::WeightType::kBF16:
    case kernels::WeightType::kQ4_0:
    case kernels::WeightType::kQ4_1:
    case kernels::WeightType::kQ5_0:
    case kernels::WeightType::kQ5_1:
    case kernels::WeightType::kQ8_0:
    case kernels::WeightType::kIQ4_NL:
    case kernels::WeightType::kIQ4_XS:
    case kernels::WeightType::kQ2_K:
    case kernels::WeightType::kQ3_K:
    case kernels::WeightType::kQ4_K:
    case kernels::WeightType::kQ5_K:
    case kernels::WeightType::kQ6_K:
    case kernels::WeightType::kMXFP4:
    case kernels::WeightType::kIQ2_XXS:
    case kernels::WeightType::kIQ2_XS:
    case kernels::WeightType::kIQ2_S:
    case kernels::WeightType::kIQ3_XXS:
    case kernels::WeightType::kIQ3_S:
    case kernels::WeightType::kIQ1_S:
    case kernels::WeightType::kIQ1_M:
      return true;
    default:
      return false;
  }
}

absl::Status CheckMatMul(const DeviceMatrix& w, int64_t x_stride, int64_t batch, int64_t y_stride) {
  const kernels::WeightTypeInfo info = kernels::GetWeightTypeInfo(w.type);
  if (!DeviceComputes(w.type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the device has no kernel for ", std::string(info.name), " weights"));
  }
  if (w.rows <= 0 || w.cols <= 0 || w.cols % info.block_elems != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ", w.rows, " x ", w.cols, " ", std::string(info.name),
                     " matrix is not whole blocks of ", info.block_elems));
  }
  if (w.row_stride_bytes < kernels::RowBytes(w.type, w.cols)) {
    return absl::InvalidArgumentError(absl::StrCat("row stride ", w.row_stride_bytes,
                                                   " is shorter than a row's ",
                                                   kernels::RowBytes(w.type, w.cols), " bytes"));
  }
  if (batch < 1 || batch > kernels::kMaxBatch) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch ", batch, " is outside 1..", kernels::kMaxBatch));
  }
  if ((batch > 1 && (x_stride < w.cols || y_stride < w.rows)) || !w.data) {
    return absl::InvalidArgumentError("activation strides shorter than a row, or null weights");
  }
  return absl::OkStatus();
}

}  // namespace waste::gpu
