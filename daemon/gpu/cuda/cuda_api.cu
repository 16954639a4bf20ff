// The CUDA runtime behind cuda_api.h.
#include <cuda_runtime.h>

#include <cstring>

#include "daemon/gpu/cuda/cuda_api.h"

namespace waste::gpu::cuda_api {
namespace {

cudaStream_t S(Handle h) { return static_cast<cudaStream_t>(h); }
cudaEvent_t E(Handle h) { return static_cast<cudaEvent_t>(h); }

}  // namespace

const char* ErrorName(int code) { return cudaGetErrorName(static_cast<cudaError_t>(code)); }
const char* ErrorString(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

int GetDeviceCount(int* count) {
  *count = 0;
  return cudaGetDeviceCount(count);
}

int SetDevice(int ordinal) { return cudaSetDevice(ordinal); }

int DeviceProperties(int ordinal, char* name, int capacity, int* major, int* minor) {
  cudaDeviceProp prop;
  cudaError_t err = cudaGetDeviceProperties(&prop, ordinal);
  if (err != cudaSuccess) return err;
  if (capacity > 0) {
    std::strncpy(name, prop.name, capacity - 1);
    name[capacity - 1] = '\0';
  }
  *major = prop.major;
  *minor = prop.minor;
  return cudaSuccess;
}

int MemGetInfo(uint64_t* free_bytes, uint64_t* total_bytes) {
  size_t f = 0, t = 0;
  cudaError_t err = cudaMemGetInfo(&f, &t);
  *free_bytes = f;
  *total_bytes = t;
  return err;
}

int StreamCreate(Handle* stream) {
  cudaStream_t s = nullptr;
  cudaError_t err = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  *stream = s;
  return err;
}

int StreamDestroy(Handle stream) { return cudaStreamDestroy(S(stream)); }
int StreamSynchronize(Handle stream) { return cudaStreamSynchronize(S(stream)); }

int Malloc(uint64_t* addr, uint64_t bytes) {
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, bytes);
  *addr = reinterpret_cast<uint64_t>(p);
  return err;
}

int Free(uint64_t addr) { return cudaFree(reinterpret_cast<void*>(addr)); }

int HostAlloc(void** ptr, uint64_t bytes) {
  return cudaHostAlloc(ptr, bytes, cudaHostAllocPortable);
}

int HostFree(void* ptr) { return cudaFreeHost(ptr); }

int CopyToDeviceAsync(uint64_t dst, const void* src, uint64_t bytes, Handle stream) {
  return cudaMemcpyAsync(reinterpret_cast<void*>(dst), src, bytes, cudaMemcpyHostToDevice,
                         S(stream));
}

int CopyToHostAsync(void* dst, uint64_t src, uint64_t bytes, Handle stream) {
  return cudaMemcpyAsync(dst, reinterpret_cast<const void*>(src), bytes, cudaMemcpyDeviceToHost,
                         S(stream));
}

int EventCreate(Handle* event, bool timing) {
  cudaEvent_t e = nullptr;
  cudaError_t err =
      cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming);
  *event = e;
  return err;
}

int EventDestroy(Handle event) { return cudaEventDestroy(E(event)); }
int EventRecord(Handle event, Handle stream) { return cudaEventRecord(E(event), S(stream)); }
int StreamWaitEvent(Handle stream, Handle event) {
  return cudaStreamWaitEvent(S(stream), E(event), 0);
}
int EventSynchronize(Handle event) { return cudaEventSynchronize(E(event)); }
int EventQuery(Handle event) { return cudaEventQuery(E(event)); }
int EventElapsedMs(Handle start, Handle end, float* ms) {
  return cudaEventElapsedTime(ms, E(start), E(end));
}

}  // namespace waste::gpu::cuda_api
