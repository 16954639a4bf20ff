#include "storage/bench_io.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "storage/aligned_buffer.h"

namespace waste::storage {
namespace {

std::string SizeName(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30) && bytes % (uint64_t{1} << 30) == 0) {
    return absl::StrFormat("%d GiB", bytes >> 30);
  }
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return absl::StrFormat("%d MiB", bytes >> 20);
  if (bytes >= (1 << 10) && bytes % (1 << 10) == 0) return absl::StrFormat("%d KiB", bytes >> 10);
  if (bytes >= (uint64_t{1} << 30)) return absl::StrFormat("%.2f GiB", bytes / double(1 << 30));
  return absl::StrFormat("%d B", bytes);
}

uint64_t PhysicalMemory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? uint64_t(pages) * uint64_t(page_size) : 0;
}

// One cell: keeps `depth` reads of `read_size` in flight at random aligned
// offsets until `options.bytes_per_cell` bytes have arrived.
absl::StatusOr<BenchIoCell> MeasureCell(Env* env, const RandomAccessFile& file, int depth,
                                        size_t read_size, const BenchIoOptions& options,
                                        std::mt19937_64& rng, IoEngine* engine) {
  ASSIGN_OR_RETURN(
      std::unique_ptr<ReadQueue> queue,
      env->NewReadQueue(&file, {.engine = options.engine, .depth = depth, .threads = depth}));
  *engine = queue->Engine();
  std::vector<AlignedBuffer> buffers;
  for (int i = 0; i < depth; ++i) {
    buffers.emplace_back(read_size);
    if (buffers.back().data() == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("bench-io: no memory for %d buffers of %s", depth, SizeName(read_size)));
    }
  }
  const uint64_t reads =
      std::max<uint64_t>(1, (options.bytes_per_cell + read_size - 1) / read_size);
  const uint64_t slots = (file.Size() - read_size) / kDirectIoAlignment + 1;
  auto request_for = [&](int slot) {
    return ReadRequest{.offset = (rng() % slots) * kDirectIoAlignment,
                       .length = read_size,
                       .buffer = buffers[slot].data(),
                       .tag = static_cast<uint64_t>(slot)};
  };

  uint64_t issued = 0;
  uint64_t finished = 0;
  std::vector<ReadCompletion> completions;
  const auto start = std::chrono::steady_clock::now();
  std::vector<ReadRequest> first;
  for (int slot = 0; slot < depth && issued < reads; ++slot, ++issued) {
    first.push_back(request_for(slot));
  }
  RETURN_IF_ERROR(queue->Submit(first));
  while (finished < reads) {
    completions.clear();
    RETURN_IF_ERROR(queue->Wait(1, &completions).status());
    for (const ReadCompletion& completion : completions) {
      RETURN_IF_ERROR(completion.status);
      ++finished;
      if (issued < reads) {
        // The buffer of a finished read is free for the next one.
        ReadRequest next = request_for(static_cast<int>(completion.tag));
        RETURN_IF_ERROR(queue->Submit({&next, 1}));
        ++issued;
      }
    }
  }
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return BenchIoCell{.direct = file.Direct(),
                     .depth = depth,
                     .read_size = read_size,
                     .bytes = reads * read_size,
                     .seconds = elapsed.count()};
}

const BenchIoCell* Best(const BenchIoReport& report, bool direct) {
  const BenchIoCell* best = nullptr;
  for (const BenchIoCell& cell : report.cells) {
    if (cell.direct != direct) continue;
    if (best == nullptr || cell.GigabytesPerSecond() > best->GigabytesPerSecond()) best = &cell;
  }
  return best;
}

void PrintTable(const BenchIoReport& report, bool direct, std::ostream& out) {
  std::vector<size_t> sizes;
  std::vector<int> depths;
  for (const BenchIoCell& cell : report.cells) {
    if (cell.direct != direct) continue;
    if (std::find(sizes.begin(), sizes.end(), cell.read_size) == sizes.end()) {
      sizes.push_back(cell.read_size);
    }
    if (std::find(depths.begin(), depths.end(), cell.depth) == depths.end()) {
      depths.push_back(cell.depth);
    }
  }
  if (sizes.empty()) return;
  out << (direct ? "O_DIRECT" : "buffered (page cache)") << ", GB/s\n";
  out << absl::StrFormat("%15s", "reads in flight");
  for (size_t size : sizes) out << absl::StrFormat(" | %8s", SizeName(size));
  out << "\n";
  for (int depth : depths) {
    out << absl::StrFormat("%15d", depth);
    for (size_t size : sizes) {
      auto it = std::find_if(report.cells.begin(), report.cells.end(), [&](const BenchIoCell& c) {
        return c.direct == direct && c.depth == depth && c.read_size == size;
      });
      if (it == report.cells.end()) {
        out << absl::StrFormat(" | %8s", "-");
      } else {
        out << absl::StrFormat(" | %8.2f", it->GigabytesPerSecond());
      }
    }
    out << "\n";
  }
}

std::string Describe(const BenchIoCell& cell) {
  return absl::StrFormat("%.2f GB/s (%s reads, %d in flight)", cell.GigabytesPerSecond(),
                         SizeName(cell.read_size), cell.depth);
}

}  // namespace

absl::StatusOr<BenchIoReport> MeasureBenchIo(Env* env, const std::string& path,
                                             const BenchIoOptions& options) {
  BenchIoReport report;
  report.path = path;
  report.ram_bytes = PhysicalMemory();
  std::mt19937_64 rng(options.seed);
  std::vector<bool> modes;
  if (options.direct) modes.push_back(true);
  if (options.buffered) modes.push_back(false);
  for (bool direct : modes) {
    ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file,
                     env->NewRandomAccessFile(path, {.direct = direct}));
    report.file_size = file->Size();
    if (direct && !file->Direct()) {
      // Measuring the page cache twice would only mislead.
      report.direct_refused = true;
      if (options.buffered) continue;
    }
    for (size_t read_size : options.read_sizes) {
      if (read_size == 0 || read_size > file->Size()) continue;
      for (int depth : options.depths) {
        if (depth < 1) continue;
        ASSIGN_OR_RETURN(BenchIoCell cell,
                         MeasureCell(env, *file, depth, read_size, options, rng, &report.engine));
        report.cells.push_back(cell);
      }
    }
  }
  if (report.cells.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bench-io: %s (%d bytes) is smaller than every read size; use a file of a few GiB", path,
        report.file_size));
  }
  return report;
}

void PrintBenchIo(const BenchIoReport& report, std::ostream& out) {
  out << absl::StrFormat("bench-io %s: %.2f GiB, engine %s, random offsets\n", report.path,
                         report.file_size / double(1 << 30), IoEngineName(report.engine));
  const BenchIoCell& any = report.cells.front();
  out << absl::StrFormat("%s per cell, GB = 1e9 bytes\n", SizeName(any.bytes));
  if (report.direct_refused) {
    out << "note: the filesystem refused O_DIRECT; only buffered reads were measured\n";
  }
  out << "\n";
  PrintTable(report, true, out);
  if (Best(report, true) != nullptr) out << "\n";
  PrintTable(report, false, out);
  const bool fits_in_ram = report.ram_bytes == 0 || report.file_size < report.ram_bytes;
  if (Best(report, false) != nullptr && fits_in_ram) {
    out << absl::StrFormat(
        "note: the file (%.2f GiB) is smaller than RAM (%.2f GiB), so buffered reads come from "
        "the page cache once read: they measure memory, not the disk\n",
        report.file_size / double(1 << 30), report.ram_bytes / double(1 << 30));
  }
  out << "\n";
  if (const BenchIoCell* best = Best(report, true)) {
    out << "limit: " << Describe(*best) << ", O_DIRECT (the disk)\n";
    if (const BenchIoCell* buffered = Best(report, false)) {
      out << "buffered best: " << Describe(*buffered) << (fits_in_ram ? " (page cache)" : "")
          << "\n";
    }
  } else if (const BenchIoCell* buffered = Best(report, false)) {
    out << "limit: " << Describe(*buffered) << ", buffered"
        << (fits_in_ram ? " (page cache: not the disk)" : "") << "\n";
  }
}

absl::Status RunBenchIo(Env* env, const std::string& path, const BenchIoOptions& options,
                        std::ostream& out) {
  ASSIGN_OR_RETURN(BenchIoReport report, MeasureBenchIo(env, path, options));
  PrintBenchIo(report, out);
  return absl::OkStatus();
}

}  // namespace waste::storage
