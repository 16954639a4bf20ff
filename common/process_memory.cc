#include "common/process_memory.h"

#include <malloc.h>

#include <cstdlib>

namespace waste {

void ConfigureDaemonHeap() {
  if (getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 2);
  if (getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) mallopt(M_MMAP_THRESHOLD, 128 * 1024);
}

void ReleaseFreeHeapMemory() { malloc_trim(0); }

}  // namespace waste
