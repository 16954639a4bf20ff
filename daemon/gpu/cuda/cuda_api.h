// The CUDA runtime and the kernels as plain C++ functions, compiled by nvcc
// (cuda_api.cu, quant_matmul.cu) into an archive that only --config=cuda
// links, so that code compiled by g++ (cuda_device.cc) never includes a
// CUDA header and Bazel never sees one. Each function returns 0 or the
// cudaError_t value; ErrorName/ErrorString describe it. Handles are
// cudaStream_t / cudaEvent_t; device addresses are integers.
#ifndef WASTE_DAEMON_GPU_CUDA_CUDA_API_H_
#define WASTE_DAEMON_GPU_CUDA_CUDA_API_H_

#include <cstdint>

namespace waste::gpu::cuda_api {

using Handle = void*;

inline constexpr int kSuccess = 0;
inline constexpr int kErrorMemoryAllocation = 2;     // cudaErrorMemoryAllocation
inline constexpr int kErrorInsufficientDriver = 35;  // cudaErrorInsufficientDriver
inline constexpr int kErrorNoDevice = 100;           // cudaErrorNoDevice
inline constexpr int kErrorNotReady = 600;           // cudaErrorNotReady

const char* ErrorName(int code);
const char* ErrorString(int code);

int GetDeviceCount(int* count);
int SetDevice(int ordinal);
// The device's name (NUL-terminated, at most capacity bytes) and compute
// capability.
int DeviceProperties(int ordinal, char* name, int capacity, int* major, int* minor);
int MemGetInfo(uint64_t* free_bytes, uint64_t* total_bytes);

int StreamCreate(Handle* stream);  // Non-blocking with respect to stream 0.
int StreamDestroy(Handle stream);
int StreamSynchronize(Handle stream);

int Malloc(uint64_t* addr, uint64_t bytes);
int Free(uint64_t addr);
int HostAlloc(void** ptr, uint64_t bytes);  // Pinned, portable.
int HostFree(void* ptr);
int CopyToDeviceAsync(uint64_t dst, const void* src, uint64_t bytes, Handle stream);
int CopyToHostAsync(void* dst, uint64_t src, uint64_t bytes, Handle stream);

int EventCreate(Handle* event, bool timing);
int EventDestroy(Handle event);
int EventRecord(Handle event, Handle stream);
int StreamWaitEvent(Handle stream, Handle event);
int EventSynchronize(Handle event);
int EventQuery(Handle event);  // 0 complete, kErrorNotReady not yet.
int EventElapsedMs(Handle start, Handle end, float* ms);

// The codebooks of the IQ1-IQ3 types (kernels/iq_grids.h) as the kernels
// keep them in device memory: SetIqTables copies them there, once, before
// a product of those types.
struct IqTables {
  uint64_t iq2xxs[256];
  uint64_t iq2xs[512];
  uint64_t iq2s[1024];
  uint64_t iq1s[2048];
  uint64_t sign_bytes[256];  // kIqSignBytes.
  uint32_t iq3xxs[256];
  uint32_t iq3s[512];
  uint8_t signs7[128];  // kIqSigns7.
};
int SetIqTables(const IqTables& tables);

// y[b * y_stride + r] = dot(row r of W, x + b * x_stride), b < batch, with
// W `rows` x `cols` of ggml type `type` (a kernels::WeightType id) at `w`,
// row r at w + r * row_stride; x, y f32. Launched on `stream`; returns the
// launch error (types without a kernel: cudaErrorInvalidValue).
int LaunchMatMul(uint32_t type, int64_t rows, int64_t cols, uint64_t w, int64_t row_stride,
                 uint64_t x, int64_t x_stride, int64_t batch, uint64_t y, int64_t y_stride,
                 Handle stream);

}  // namespace waste::gpu::cuda_api

#endif  // WASTE_DAEMON_GPU_CUDA_CUDA_API_H_
