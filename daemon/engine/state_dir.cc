#include "daemon/engine/state_dir.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"

namespace waste::engine {
namespace {

// The writer's pid of a temporary state file "NAME.tmp.PID[.N]", or 0 when
// `name` is not one.
pid_t WriterOf(const std::string& name) {
  const size_t at = name.rfind(".tmp.");
  if (at == std::string::npos) return 0;
  const std::string rest = name.substr(at + 5);
  std::vector<std::string> fields = absl::StrSplit(rest, '.');
  int64_t pid = 0;
  if (fields.empty() || fields.size() > 2 || !absl::SimpleAtoi(fields[0], &pid) || pid <= 0) {
    return 0;
  }
  return static_cast<pid_t>(pid);
}

bool Running(pid_t pid) { return pid == getpid() || kill(pid, 0) == 0 || errno == EPERM; }

}  // namespace

std::string TemporaryStatePath(const std::string& path) {
  return absl::StrCat(path, ".tmp.", getpid());
}

int RemoveStaleTemporaryFiles(const std::string& state_dir) {
  if (state_dir.empty()) return 0;
  std::error_code ec;
  int removed = 0;
  for (auto it = std::filesystem::recursive_directory_iterator(state_dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const pid_t writer = WriterOf(it->path().filename().string());
    if (writer == 0 || Running(writer)) continue;
    std::error_code remove_ec;
    if (std::filesystem::remove(it->path(), remove_ec)) {
      ++removed;
    } else {
      WLOG(WARNING) << "cannot remove stale temporary file " << it->path().string() << ": "
                    << remove_ec.message();
    }
  }
  if (removed > 0) {
    WLOG(WARNING) << "removed " << removed << " temporary file(s) under " << state_dir
                  << " left by a daemon that stopped while writing state (each state file "
                     "is still either its old or its new version)";
  }
  return removed;
}

}  // namespace waste::engine
