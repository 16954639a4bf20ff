// The state directory (--state-dir) after a crash. Every state file
// (expert hotlists, saved sessions) is written to a temporary file named
// "<final name>.tmp.<writer's pid>[.<n>]", fsynced and renamed over the final
// name, so a daemon killed at any point leaves each file either old or new,
// plus at most a temporary file of the write it was in. Those are removed
// when the next daemon starts; a corrupt state file (checksum or syntax) is
// refused with a warning where it is read (hotlist.h, session_store.h).
#ifndef WASTE_DAEMON_ENGINE_STATE_DIR_H_
#define WASTE_DAEMON_ENGINE_STATE_DIR_H_

#include <string>

namespace waste::engine {

// The temporary name for writing `path` from this process.
std::string TemporaryStatePath(const std::string& path);

// Removes the temporary files under `state_dir` (recursively) whose writer
// is no longer running, logging how many; returns that count. A missing
// directory is not an error.
int RemoveStaleTemporaryFiles(const std::string& state_dir);

}  // namespace waste::engine

#endif  // WASTE_DAEMON_ENGINE_STATE_DIR_H_
