// OpenCudaDevice in a build without --config=cuda.
#include "daemon/gpu/cuda/cuda_device.h"

namespace waste::gpu {

bool CudaCompiledIn() { return false; }

absl::StatusOr<std::unique_ptr<Device>> OpenCudaDevice(int ordinal) {
  (void)ordinal;
  return absl::UnavailableError(
      "no CUDA device: this binary was built without CUDA (build with --config=cuda)");
}

}  // namespace waste::gpu
