#include "daemon/bench_io_command.h"

#include <iostream>

#include "common/cli_args.h"
#include "storage/bench_io.h"
#include "storage/env.h"

namespace waste {
namespace {

constexpr char kUsage[] = R"(usage: wasted bench-io [flags] FILE

Measures the read bandwidth of FILE's disk through waste's reader: O_DIRECT
and buffered reads, 1..32 reads in flight, 256 KiB..8 MiB reads at random
offsets. Use a file of several GiB that is not in the page cache.

flags:
  --mib-per-cell N    MiB read per table cell (default 1024)
  --engine E          auto, io_uring, threads or sync (default auto)
  --direct-only       skip the buffered half
)";

}  // namespace

int RunBenchIoCommand(const std::vector<std::string>& raw) {
  auto args =
      ParseArgs(raw, {{"mib-per-cell"}, {"engine"}, {"direct-only", false}, {"help", false}});
  if (!args.ok() || args->positional().size() != 1 || args->Has("help")) {
    if (!args.ok()) std::cerr << "wasted bench-io: " << args.status().message() << "\n\n";
    (args.ok() && args->Has("help") ? std::cout : std::cerr) << kUsage;
    return args.ok() && args->Has("help") ? 0 : 2;
  }
  storage::BenchIoOptions options;
  absl::StatusOr<int64_t> mib = args->GetInt("mib-per-cell", 1024);
  if (!mib.ok() || *mib <= 0) {
    std::cerr << "wasted bench-io: --mib-per-cell expects a positive integer\n";
    return 2;
  }
  options.bytes_per_cell = static_cast<uint64_t>(*mib) << 20;
  options.buffered = !args->Has("direct-only");
  std::string engine = args->GetOr("engine", "auto");
  if (engine == "io_uring") {
    options.engine = storage::IoEngine::kIoUring;
  } else if (engine == "threads") {
    options.engine = storage::IoEngine::kThreads;
  } else if (engine == "sync") {
    options.engine = storage::IoEngine::kSync;
  } else if (engine != "auto") {
    std::cerr << "wasted bench-io: unknown --engine " << engine
              << " (auto, io_uring, threads or sync)\n";
    return 2;
  }
  absl::Status status =
      storage::RunBenchIo(storage::Env::Default(), args->positional()[0], options, std::cout);
  if (!status.ok()) {
    std::cerr << "wasted bench-io: " << status.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace waste
