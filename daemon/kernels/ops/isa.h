// Instruction-set selection for the transformer ops in this package.
//
// Every op has a scalar reference and AVX2 / AVX-512 versions compiled in
// separate translation units with their own -m flags. Ops take an `Isa`
// argument (default kAuto = the best the CPU supports) so tests and benches
// can force each ISA and compare it against the scalar reference.
//
// Thread-safety: all functions here are thread-safe; detection runs once.
#ifndef WASTE_DAEMON_KERNELS_OPS_ISA_H_
#define WASTE_DAEMON_KERNELS_OPS_ISA_H_

#include <vector>

namespace waste::kernels::ops {

enum class Isa {
  kAuto = -1,   // Resolved to BestIsa() by every op.
  kScalar = 0,  // Plain C++; the reference every other ISA is tested against.
  kAvx2 = 1,    // AVX2 + FMA + F16C.
  kAvx512 = 2,  // AVX-512 F/BW/VL/DQ (+ the AVX2 set).
};

// True if this CPU can run `isa`. kScalar and kAuto are always available.
bool IsaAvailable(Isa isa);

// The fastest available ISA. The environment variable WASTE_OPS_ISA
// ("scalar", "avx2", "avx512") caps it, read once on first call; a value the
// CPU cannot run is ignored.
Isa BestIsa();

// kScalar first, then every available vector ISA; for tests and benches.
std::vector<Isa> AvailableIsas();

// "auto", "scalar", "avx2", "avx512".
const char* IsaName(Isa isa);

// Maps kAuto to BestIsa() and CHECK-fails on an ISA the CPU cannot run.
Isa ResolveIsa(Isa isa);

}  // namespace waste::kernels::ops

#endif  // WASTE_DAEMON_KERNELS_OPS_ISA_H_
