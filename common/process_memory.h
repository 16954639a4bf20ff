// The daemon's heap over days: glibc malloc keeps what is freed in up to 8
// arenas per core and grows the threshold under which freed large blocks
// stay in them, so a long-running process that loads and frees models, KV
// caches and per-call buffers from many threads sees its RSS creep although
// the bytes in use stay flat (measured by tests/soak: 2.4 MiB in use, 45 MiB
// held by 16 arenas after 8 minutes). The daemon does not allocate on the
// token path, so it gives up little by bounding that.
#ifndef WASTE_COMMON_PROCESS_MEMORY_H_
#define WASTE_COMMON_PROCESS_MEMORY_H_

namespace waste {

// At start-up, before threads: at most 2 malloc arenas, and blocks of
// 128 KiB or more always mapped on their own (so freeing one returns it to
// the system). Environment settings (MALLOC_ARENA_MAX,
// MALLOC_MMAP_THRESHOLD_) still win.
void ConfigureDaemonHeap();

// Returns the free pages malloc holds to the system (malloc_trim). Cheap
// enough to call every few seconds.
void ReleaseFreeHeapMemory();

}  // namespace waste

#endif  // WASTE_COMMON_PROCESS_MEMORY_H_
