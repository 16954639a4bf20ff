// What the decode kernels can do with weights already in cache: the third
// bound of a `wasted bench` run beside memory and disk. A type whose loop
// decodes slower than memory delivers (the 1-3-bit codebook types, or any
// type on a slow core) is held by its kernels, not by the machine's memory,
// and its run is measured against that.
#ifndef WASTE_DAEMON_BENCH_COMPUTE_RATE_H_
#define WASTE_DAEMON_BENCH_COMPUTE_RATE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/kernels/matvec.h"
#include "daemon/model/model.h"

namespace waste::bench {

// The weight bytes of one type that a decode step multiplies through, and
// the width of its widest matrix (the probe's row width). `repacked`: these
// are matrices a resident load rewrites into this ISA's resident layout
// (TensorRef::interleaves); the expert slices and MLA's per-head matrices
// stay as the file has them, and so does everything when weights stream.
struct TypeBytes {
  kernels::WeightType type = kernels::WeightType::kF32;
  bool repacked = false;
  uint64_t bytes = 0;
  int64_t cols = 0;
};

// Per weight type (and, in a `resident` run, repacked or not), the bytes of
// the matrices a decode step's products read:
// every layer's (the routed experts at n_expert_used of n_expert, each
// layer's at its expert slices' types) and the output head; not the token
// embeddings (one row per token) nor norms and biases (no products). Their
// sum is what TouchedBytesPerToken counts, less those small vectors.
std::vector<TypeBytes> ProductBytesByType(const model::Model& model, bool resident);

// A type's kernel rate in GB/s of weights: `threads` threads, each
// multiplying its own matrix of `cols` columns and about `bytes_per_thread`
// bytes (in the layout resident weights take on this ISA when `resident`,
// else as GGUF has them) by one vector, call after call for about
// `seconds`; best of `passes`, wall time. (Threads of its own, not the
// decode's pool: a pool may run both halves on one thread, and the probe
// asks what the cores can do. Where the VM's vCPUs are SMT siblings of one
// core, 2 threads reach about what 1 does on port-bound loops.)
absl::StatusOr<double> MeasureKernelGbps(kernels::WeightType type, int64_t cols, bool resident,
                                         int threads, uint64_t bytes_per_thread = 192 << 10,
                                         double seconds = 0.02, int passes = 5);

// A decode step's compute time at the probed rates: sum of bytes / rate
// (the repacked entries probed in the resident layouts).
struct ComputeBound {
  std::vector<TypeBytes> types;
  std::vector<double> gbps;  // Per entry of types.
  double seconds_per_token = 0;
};
absl::StatusOr<ComputeBound> MeasureComputeBound(const model::Model& model, bool resident,
                                                 int threads);

// Per type the faster of two probes of the same model (a busy host slows
// one probe more than the other; the bound is what the kernels can do),
// with the time per token recomputed.
ComputeBound FasterOf(const ComputeBound& a, const ComputeBound& b);

}  // namespace waste::bench

#endif  // WASTE_DAEMON_BENCH_COMPUTE_RATE_H_
