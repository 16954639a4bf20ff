#include "daemon/memory/usable_ram.h"

#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace waste::memory {
namespace {

// Values at or above this mean "no limit" (v1 writes PAGE_COUNTER_MAX pages,
// 0x7ffffffffffff000 on x86-64).
constexpr uint64_t kNoLimit = uint64_t{1} << 62;

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A limit file holds a number or "max"; nullopt when absent or unlimited.
std::optional<uint64_t> ReadLimit(const std::string& path) {
  std::optional<std::string> text = ReadSmallFile(path);
  if (!text) return std::nullopt;
  absl::string_view value = absl::StripAsciiWhitespace(*text);
  uint64_t bytes;
  if (value == "max" || !absl::SimpleAtoi(value, &bytes) || bytes >= kNoLimit) {
    return std::nullopt;
  }
  return bytes;
}

struct Limit {
  uint64_t bytes;
  std::string source;
};

// The smallest limit named `file` in `dir`/`cgroup` and its ancestors: a
// parent's limit caps its children, and the process's own directory may be
// unlimited while an ancestor is not.
std::optional<Limit> SmallestAlongPath(const std::string& dir, const std::string& cgroup,
                                       const std::string& file, const std::string& what) {
  std::optional<Limit> best;
  std::string path = cgroup;
  while (true) {
    std::string full = absl::StrCat(dir, path == "/" ? "" : path, "/", file);
    if (std::optional<uint64_t> limit = ReadLimit(full)) {
      if (!best || *limit < best->bytes) {
        best = Limit{*limit, absl::StrCat(what, " ", file, " of ", path)};
      }
    }
    if (path.empty() || path == "/") break;
    size_t slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
  return best;
}

// v1: "N:memory:/path" (the controller list may hold several names).
// v2: "0::/path".
struct CgroupPaths {
  std::optional<std::string> v1_memory;
  std::optional<std::string> v2;
};

CgroupPaths ParseProcCgroup(const std::string& text) {
  CgroupPaths paths;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> fields = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (fields.size() != 3) continue;
    if (fields[0] == "0" && fields[1].empty()) {
      paths.v2 = fields[2];
      continue;
    }
    for (absl::string_view controller : absl::StrSplit(fields[1], ',')) {
      if (controller == "memory") paths.v1_memory = fields[2];
    }
  }
  return paths;
}

}  // namespace

absl::StatusOr<UsableRam> DetectUsableRam(const RamProbePaths& paths) {
  std::optional<std::string> meminfo = ReadSmallFile(paths.proc_meminfo);
  if (!meminfo) {
    return absl::UnavailableError(
        absl::StrCat("cannot read ", paths.proc_meminfo, "; pass --ram-budget explicitly"));
  }
  UsableRam ram;
  for (absl::string_view line : absl::StrSplit(*meminfo, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() < 2) continue;
    uint64_t kib;
    if (!absl::SimpleAtoi(fields[1], &kib)) continue;
    if (fields[0] == "MemTotal:") ram.physical_bytes = kib * 1024;
    if (fields[0] == "MemAvailable:") ram.available_bytes = kib * 1024;
  }
  if (ram.physical_bytes == 0) {
    return absl::DataLossError(
        absl::StrCat("no MemTotal line in ", paths.proc_meminfo, "; pass --ram-budget explicitly"));
  }
  ram.bytes = ram.physical_bytes;
  ram.source = "MemTotal (no cgroup memory limit)";

  std::optional<Limit> limit;
  if (std::optional<std::string> text = ReadSmallFile(paths.proc_self_cgroup)) {
    CgroupPaths cgroups = ParseProcCgroup(*text);
    if (cgroups.v2) {
      // Pure v2 mounts at the root; hybrid systems put it at unified/.
      for (const std::string& dir : {paths.cgroup_root, paths.cgroup_root + "/unified"}) {
        limit = SmallestAlongPath(dir, *cgroups.v2, "memory.max", "cgroup v2");
        if (limit) break;
      }
    }
    if (!limit && cgroups.v1_memory) {
      limit = SmallestAlongPath(paths.cgroup_root + "/memory", *cgroups.v1_memory,
                                "memory.limit_in_bytes", "cgroup v1");
    }
  }
  if (limit && limit->bytes < ram.bytes) {
    ram.bytes = limit->bytes;
    ram.source = limit->source;
  } else if (limit) {
    ram.source = absl::StrCat("MemTotal (", limit->source, " is larger)");
  }
  return ram;
}

}  // namespace waste::memory
