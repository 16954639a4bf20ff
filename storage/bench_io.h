// bench-io: this disk's read bandwidth through our own reader (Env +
// ReadQueue), O_DIRECT against buffered, over a grid of reads in flight and
// read sizes, at random offsets over one file. The best O_DIRECT cell is the
// "limit" that streaming figures are quoted against. `wasted bench-io FILE`
// and the standalone //storage:bench_io binary both call RunBenchIo.
//
// Thread safety: a run uses one ReadQueue from the calling thread; run one
// at a time per file (concurrent runs measure each other).
#ifndef WASTE_STORAGE_BENCH_IO_H_
#define WASTE_STORAGE_BENCH_IO_H_

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/env.h"

namespace waste::storage {

struct BenchIoOptions {
  IoEngine engine = IoEngine::kAuto;
  std::vector<int> depths = {1, 2, 4, 8, 16, 32};
  std::vector<size_t> read_sizes = {256 << 10, 1 << 20, 4 << 20, 8 << 20};
  // Bytes read per cell (rounded up to whole reads; at least one read).
  uint64_t bytes_per_cell = uint64_t{1} << 30;
  bool direct = true;
  bool buffered = true;
  uint64_t seed = 1;
};

struct BenchIoCell {
  bool direct = false;  // As opened: false also when O_DIRECT was refused.
  int depth = 0;
  size_t read_size = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  double GigabytesPerSecond() const { return seconds > 0 ? bytes / seconds / 1e9 : 0; }
};

struct BenchIoReport {
  std::string path;
  uint64_t file_size = 0;
  uint64_t ram_bytes = 0;             // Physical memory of this machine.
  IoEngine engine = IoEngine::kAuto;  // As resolved.
  bool direct_refused = false;        // O_DIRECT was asked for and the filesystem refused it.
  std::vector<BenchIoCell> cells;
};

// Runs the grid and returns the measurements. Errors: the file cannot be
// opened or is smaller than the smallest read size, or a read fails (the
// message names the read).
absl::StatusOr<BenchIoReport> MeasureBenchIo(Env* env, const std::string& path,
                                             const BenchIoOptions& options);

// Prints `report` as one table per mode (GB/s, rows = reads in flight,
// columns = read size) followed by the limit line.
void PrintBenchIo(const BenchIoReport& report, std::ostream& out);

// MeasureBenchIo then PrintBenchIo.
absl::Status RunBenchIo(Env* env, const std::string& path, const BenchIoOptions& options,
                        std::ostream& out);

}  // namespace waste::storage

#endif  // WASTE_STORAGE_BENCH_IO_H_
