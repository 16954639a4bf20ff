// The CUDA backend of the Device seam (daemon/gpu/device.h): device memory
// by cudaMalloc (allocated at load, never on the token path), pinned
// staging by cudaHostAlloc, a compute and a copy stream (non-blocking),
// events (without timing; each StreamWait is bracketed by a pair of timing
// events so Stats() can report how long a stream stood waiting), and the
// quantized products of quant_matmul.cu.
//
// Built only with --config=cuda (nvcc from a genrule, cudart linked
// statically). Without it, or at run time without a driver or a device,
// OpenCudaDevice is UNAVAILABLE and says why; callers run on the CPU.
#ifndef WASTE_DAEMON_GPU_CUDA_CUDA_DEVICE_H_
#define WASTE_DAEMON_GPU_CUDA_CUDA_DEVICE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "daemon/gpu/device.h"

namespace waste::gpu {

// True when this binary was built with --config=cuda.
bool CudaCompiledIn();

// Opens CUDA device `ordinal`. UNAVAILABLE ("no CUDA device: ...") when the
// binary has no CUDA, the driver is missing or too old, there is no device,
// or its compute capability is under 8.0 (the kernels are built for
// sm_80 / sm_89 PTX and sm_90).
absl::StatusOr<std::unique_ptr<Device>> OpenCudaDevice(int ordinal = 0);

}  // namespace waste::gpu

#endif  // WASTE_DAEMON_GPU_CUDA_CUDA_DEVICE_H_
