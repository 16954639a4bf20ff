// Which instruction-set level of the kernels this CPU can run, and how many
// cores it has for them.
#ifndef WASTE_DAEMON_KERNELS_CPU_FEATURES_H_
#define WASTE_DAEMON_KERNELS_CPU_FEATURES_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace waste::kernels {

// Kernel families, in the order DetectIsa prefers them (higher is better).
//  kAvx2:    AVX2 + FMA + F16C (Haswell, Zen 1 and later).
//  kAvxVnni: kAvx2 + AVX-VNNI, vpdpbusd on ymm (Alder Lake and the Intel
//            client cores after it, which have no AVX-512; Zen 5): the AVX2
//            loops compiled again with one instruction per 4-byte dot where
//            AVX2 takes vpmaddubsw + vpmaddwd.
//  kAvx512:  AVX-512 F/BW/VL/VNNI/VBMI/BITALG (Ice Lake, Zen 4 and later:
//            every CPU with VNNI and VBMI has BITALG too).
// A CPU of a higher family need not run a lower one: Ice Lake and Zen 4
// have AVX-512 but not AVX-VNNI.
enum class Isa { kScalar = 0, kAvx2 = 1, kAvxVnni = 2, kAvx512 = 3 };

// True for the families that run the AVX2 loops (kAvx2, kAvxVnni): the
// same code and data layouts, one compiled with AVX-VNNI.
inline bool IsAvx2Family(Isa isa) { return isa == Isa::kAvx2 || isa == Isa::kAvxVnni; }

std::string_view IsaName(Isa isa);

// The best family this CPU and OS support (checked once, then cached).
// WASTE_KERNELS_ISA=scalar|avx2|avxvnni|avx512 in the environment caps it
// (the best supported family at or below it), for comparing paths on one
// machine.
Isa DetectIsa();

// Every family this machine can run, kScalar first, in Isa order; tests run
// each. Computed once.
const std::vector<Isa>& SupportedIsas();

// Whether this machine can run `isa`'s loops.
bool IsaSupported(Isa isa);

// Whether the matrix-unit loops (matmul_amx.cc) run here: the CPU has
// AMX-TILE and AMX-INT8 (Sapphire Rapids and later Xeons), DetectIsa() is
// kAvx512 (their epilogue is AVX-512), and the kernel granted this process
// the tile state (arch_prctl ARCH_REQ_XCOMP_PERM, Linux 5.16+), which the
// first call requests. WASTE_KERNELS_AMX=0 in the environment turns them off.
// Checked once, then cached.
bool MatrixUnitAvailable();

// How the codebook loops read codebooks too large for registers: the
// AVX-512 loops of IQ1_S, IQ1_M and IQ2_S (2048 and 1024 entries of 8
// bytes) and the AVX2 loops of IQ3_XXS and IQ3_S (256 and 512 of 4 bytes):
// with gathers (vpgatherqq, 8 entries; vpgatherdd, 8), or with
// scalar-indexed loads merged into a vector. Which is faster depends on the
// core: gathers are quick on Sapphire Rapids and slow where the
// gather-data-sampling fix is in the microcode (Skylake to Tiger Lake) and
// on the AMD cores measured so far. kAuto, the default, times both once per
// process and ISA and keeps the faster. Both give the same bits.
enum class CodebookReads { kAuto, kGather, kScalar };

// The setting: the last SetCodebookReads, else WASTE_KERNELS_GATHER=1 (kGather)
// or 0 (kScalar) from the environment, else kAuto.
CodebookReads CodebookReadsSetting();
// For tests and A/B runs in one process.
void SetCodebookReads(CodebookReads reads);

// One loop family's choice (each ISA library has its own): the setting, or
// for kAuto whether `read(true)` (a fixed set of codebook reads done with
// gathers) has a best time of 5 at least 10% below `read(false)`'s (the
// same reads with scalar-indexed loads), alternating, measured on the first
// kAuto call and kept.
class CodebookGatherChoice {
 public:
  constexpr explicit CodebookGatherChoice(void (*read)(bool gather)) : read_(read) {}
  bool Gathers();

 private:
  void (*const read_)(bool gather);
  std::once_flag measured_;
  bool faster_ = false;
};
// Fills out[0 .. count) with pseudo-random codebook indices below 2^bits
// (the probes' input).
void ProbeIndices(uint16_t* out, int count, int bits);

// The number of physical cores this process may run on: distinct (package,
// die, core) ids among the CPUs in its affinity mask (sched_getaffinity), read
// from /sys/devices/system/cpu/cpuN/topology. SMT siblings share one core's
// execution units, and matvec is bound by them or by memory, so a second
// thread per core adds little and, once it is descheduled, costs. Falls back
// to the mask's size, then to std::thread::hardware_concurrency(), where the
// topology is unreadable. Always >= 1. Not cached: the mask can change.
int PhysicalCores();

// PhysicalCores' count for `cpus` with the topology under `cpu_dir` (normally
// /sys/devices/system/cpu); 0 if any of them has no readable topology.
int CountPhysicalCores(const std::string& cpu_dir, const std::vector<int>& cpus);

}  // namespace waste::kernels

#endif  // WASTE_DAEMON_KERNELS_CPU_FEATURES_H_
