// WeightPool: the memory a model's weights live in, allocated once when the
// model loads (one anonymous mmap, 2 MiB aligned so O_DIRECT reads can land
// anywhere on a 4096 boundary and transparent huge pages can back it) and
// carved into a pinned region followed by streaming slots of up to two sizes
// (equal slots, then larger ones: a MoE plan whose trunk streams keeps
// expert-sized slots for the experts and a few trunk-sized ones, instead of
// making every slot as large as the largest trunk chunk). Nothing on the
// token path allocates: the store hands out addresses inside the pool.
//
// Huge pages are asked for with MADV_HUGEPAGE (a hint: the kernel may not
// have them); mlock is attempted only when asked and reported, not required
// (non-root processes usually have an 8 MiB RLIMIT_MEMLOCK).
//
// Ownership: owns the mapping, unmapped on destruction. Thread-safety:
// immutable after Create; the bytes are the users' to synchronise.
#ifndef WASTE_DAEMON_MEMORY_POOL_H_
#define WASTE_DAEMON_MEMORY_POOL_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace waste::memory {

struct PoolOptions {
  bool huge_pages = true;  // madvise(MADV_HUGEPAGE).
  bool lock = false;       // mlock the whole pool (faults every page in now).
};

// How the pool is carved: slots 0 .. n_slots - 1 of slot_bytes, then slots
// n_slots .. n_slots + n_large_slots - 1 of large_slot_bytes.
struct PoolLayout {
  uint64_t pinned_bytes = 0;
  uint64_t slot_bytes = 0;
  int n_slots = 0;
  uint64_t large_slot_bytes = 0;
  int n_large_slots = 0;
};

class WeightPool {
 public:
  // Sizes are rounded up to 4096. A negative count is INVALID_ARGUMENT; a
  // failed mmap is RESOURCE_EXHAUSTED naming the size.
  static absl::StatusOr<std::unique_ptr<WeightPool>> Create(const PoolLayout& layout,
                                                            const PoolOptions& options = {});
  // Equal slots only.
  static absl::StatusOr<std::unique_ptr<WeightPool>> Create(uint64_t pinned_bytes,
                                                            uint64_t slot_bytes, int n_slots,
                                                            const PoolOptions& options = {}) {
    return Create(PoolLayout{pinned_bytes, slot_bytes, n_slots, 0, 0}, options);
  }
  ~WeightPool();
  WeightPool(const WeightPool&) = delete;
  WeightPool& operator=(const WeightPool&) = delete;

  uint8_t* pinned() const { return base_; }
  uint64_t pinned_bytes() const { return pinned_bytes_; }
  // Slot i of both sizes (0 <= i < n_slots() + n_large_slots()).
  uint8_t* slot(int i) const;
  int n_slots() const { return n_slots_; }
  uint64_t slot_bytes() const { return slot_bytes_; }
  int n_large_slots() const { return n_large_slots_; }
  uint64_t large_slot_bytes() const { return large_slot_bytes_; }
  uint64_t bytes() const { return bytes_; }
  bool huge_pages() const { return huge_pages_; }  // madvise accepted.
  bool locked() const { return locked_; }

 private:
  WeightPool() = default;

  uint8_t* base_ = nullptr;
  uint64_t bytes_ = 0;
  uint64_t pinned_bytes_ = 0;
  uint64_t slot_bytes_ = 0;
  int n_slots_ = 0;
  uint64_t large_slot_bytes_ = 0;
  int n_large_slots_ = 0;
  bool huge_pages_ = false;
  bool locked_ = false;
};

}  // namespace waste::memory

#endif  // WASTE_DAEMON_MEMORY_POOL_H_
