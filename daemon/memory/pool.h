// WeightPool: the memory a model's weights live in, allocated once when the
// model loads (one anonymous mmap, 2 MiB aligned so O_DIRECT reads can land
// anywhere on a 4096 boundary and transparent huge pages can back it) and
// carved into a pinned region followed by equal streaming slots. Nothing on
// the token path allocates: the store hands out addresses inside the pool.
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

class WeightPool {
 public:
  // `pinned_bytes` and `slot_bytes` are rounded up to 4096. A failed mmap is
  // RESOURCE_EXHAUSTED naming the size.
  static absl::StatusOr<std::unique_ptr<WeightPool>> Create(uint64_t pinned_bytes,
                                                            uint64_t slot_bytes, int n_slots,
                                                            const PoolOptions& options = {});
  ~WeightPool();
  WeightPool(const WeightPool&) = delete;
  WeightPool& operator=(const WeightPool&) = delete;

  uint8_t* pinned() const { return base_; }
  uint64_t pinned_bytes() const { return pinned_bytes_; }
  uint8_t* slot(int i) const;
  int n_slots() const { return n_slots_; }
  uint64_t slot_bytes() const { return slot_bytes_; }
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
  bool huge_pages_ = false;
  bool locked_ = false;
};

}  // namespace waste::memory

#endif  // WASTE_DAEMON_MEMORY_POOL_H_
