#include "daemon/memory/pool.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "storage/aligned_buffer.h"

namespace waste::memory {
namespace {

constexpr uint64_t kHugePage = uint64_t{2} << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<WeightPool>> WeightPool::Create(const PoolLayout& layout,
                                                               const PoolOptions& options) {
  if (layout.n_slots < 0 || layout.n_large_slots < 0) {
    return absl::InvalidArgumentError(absl::StrCat("slot counts ", layout.n_slots, " and ",
                                                   layout.n_large_slots, " must be >= 0"));
  }
  auto pool = std::unique_ptr<WeightPool>(new WeightPool());
  pool->pinned_bytes_ = storage::AlignUp(layout.pinned_bytes, storage::kDirectIoAlignment);
  pool->slot_bytes_ = storage::AlignUp(layout.slot_bytes, storage::kDirectIoAlignment);
  pool->n_slots_ = layout.n_slots;
  pool->large_slot_bytes_ = storage::AlignUp(layout.large_slot_bytes, storage::kDirectIoAlignment);
  pool->n_large_slots_ = layout.n_large_slots;
  pool->bytes_ = std::max<uint64_t>(pool->pinned_bytes_ + layout.n_slots * pool->slot_bytes_ +
                                        layout.n_large_slots * pool->large_slot_bytes_,
                                    storage::kDirectIoAlignment);
  // Map a huge page more and trim, so the pool starts on a 2 MiB boundary.
  const uint64_t mapped = pool->bytes_ + kHugePage;
  void* raw = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    int error = errno;
    return absl::ResourceExhaustedError(absl::StrCat("cannot map a weight pool of ", pool->bytes_,
                                                     " bytes: ", strerror(error),
                                                     "; lower --ram-budget"));
  }
  uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  uintptr_t aligned = storage::AlignUp(start, kHugePage);
  if (aligned > start) munmap(raw, aligned - start);
  uintptr_t end = aligned + pool->bytes_;
  uintptr_t mapped_end = start + mapped;
  if (mapped_end > end) munmap(reinterpret_cast<void*>(end), mapped_end - end);
  pool->base_ = reinterpret_cast<uint8_t*>(aligned);

  if (options.huge_pages) {
    pool->huge_pages_ = madvise(pool->base_, pool->bytes_, MADV_HUGEPAGE) == 0;
  }
  if (options.lock) {
    if (mlock(pool->base_, pool->bytes_) == 0) {
      pool->locked_ = true;
    } else {
      WLOG(WARNING) << "could not mlock the " << pool->bytes_ << "-byte weight pool ("
                    << strerror(errno) << "); it stays unlocked (no swap is used either way)";
    }
  }
  return pool;
}

WeightPool::~WeightPool() {
  if (base_ != nullptr) munmap(base_, bytes_);
}

uint8_t* WeightPool::slot(int i) const {
  WCHECK(i >= 0 && i < n_slots_ + n_large_slots_)
      << "slot " << i << " of " << n_slots_ << " + " << n_large_slots_;
  uint8_t* slots = base_ + pinned_bytes_;
  if (i < n_slots_) return slots + static_cast<uint64_t>(i) * slot_bytes_;
  return slots + n_slots_ * slot_bytes_ + static_cast<uint64_t>(i - n_slots_) * large_slot_bytes_;
}

}  // namespace waste::memory
