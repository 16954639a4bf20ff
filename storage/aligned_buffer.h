// AlignedBuffer: a heap buffer whose start address is aligned, as O_DIRECT
// reads require (the bounce buffers of the posix Env and io_uring queue, the
// buffers of bench-io).
//
// Ownership: owns its memory; movable, not copyable. Not thread-safe (use
// from one thread, or hand out disjoint ranges).
#ifndef WASTE_STORAGE_ALIGNED_BUFFER_H_
#define WASTE_STORAGE_ALIGNED_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <utility>

namespace waste::storage {

// The alignment O_DIRECT needs on every filesystem we care about (logical
// block sizes are 512 or 4096; 4096 satisfies both).
inline constexpr size_t kDirectIoAlignment = 4096;

inline constexpr uint64_t AlignDown(uint64_t value, uint64_t alignment) {
  return value - value % alignment;
}

inline constexpr uint64_t AlignUp(uint64_t value, uint64_t alignment) {
  return AlignDown(value + alignment - 1, alignment);
}

inline bool IsAligned(uint64_t value, uint64_t alignment) { return value % alignment == 0; }

inline bool IsAligned(const void* pointer, uint64_t alignment) {
  return reinterpret_cast<uintptr_t>(pointer) % alignment == 0;
}

class AlignedBuffer {
 public:
  AlignedBuffer() = default;

  // Allocates `size` bytes (rounded up to `alignment`) aligned to
  // `alignment`, a power of two. The contents are uninitialised. data() is
  // null when the allocation failed or size is 0.
  explicit AlignedBuffer(size_t size, size_t alignment = kDirectIoAlignment) {
    if (size == 0) return;
    data_ = static_cast<char*>(std::aligned_alloc(alignment, AlignUp(size, alignment)));
    if (data_ != nullptr) size_ = size;
  }

  AlignedBuffer(AlignedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    if (this != &other) {
      std::free(data_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }

  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  ~AlignedBuffer() { std::free(data_); }

  char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace waste::storage

#endif  // WASTE_STORAGE_ALIGNED_BUFFER_H_
