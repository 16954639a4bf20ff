// Standalone bench-io until `wasted bench-io FILE` exists:
//   bazel run -c opt //storage:bench_io -- /path/to/big/file [--bytes_per_cell_mib=1024]
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "storage/bench_io.h"
#include "storage/env.h"

ABSL_FLAG(int64_t, bytes_per_cell_mib, 1024, "MiB read per cell of the table");
ABSL_FLAG(std::string, engine, "auto", "auto, io_uring, threads or sync");
ABSL_FLAG(bool, direct, true, "measure O_DIRECT reads");
ABSL_FLAG(bool, buffered, true, "measure buffered reads");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "bench_io FILE: read bandwidth of FILE's disk through waste's reader");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 2) {
    std::cerr << "usage: bench_io [flags] FILE (a file of a few GiB on the disk to measure)\n";
    return 2;
  }
  waste::storage::BenchIoOptions options;
  options.bytes_per_cell = uint64_t(absl::GetFlag(FLAGS_bytes_per_cell_mib)) << 20;
  options.direct = absl::GetFlag(FLAGS_direct);
  options.buffered = absl::GetFlag(FLAGS_buffered);
  const std::string engine = absl::GetFlag(FLAGS_engine);
  if (engine == "io_uring") {
    options.engine = waste::storage::IoEngine::kIoUring;
  } else if (engine == "threads") {
    options.engine = waste::storage::IoEngine::kThreads;
  } else if (engine == "sync") {
    options.engine = waste::storage::IoEngine::kSync;
  } else if (engine != "auto") {
    std::cerr << "unknown --engine=" << engine << " (auto, io_uring, threads or sync)\n";
    return 2;
  }
  absl::Status status =
      waste::storage::RunBenchIo(waste::storage::Env::Default(), args[1], options, std::cout);
  if (!status.ok()) {
    std::cerr << "bench_io: " << status << "\n";
    return 1;
  }
  return 0;
}
