#include "common/default_address.h"

#include <cstdlib>

namespace waste {

std::string DefaultSocketPath() {
  const char* runtime_directory = getenv("RUNTIME_DIRECTORY");
  if (runtime_directory != nullptr && runtime_directory[0] != '\0') {
    // systemd may list several directories separated by ':'; ours is first.
    std::string dir(runtime_directory);
    return dir.substr(0, dir.find(':')) + "/wasted.sock";
  }
  const char* xdg = getenv("XDG_RUNTIME_DIR");
  if (xdg != nullptr && xdg[0] != '\0') return std::string(xdg) + "/waste/wasted.sock";
  return "/run/waste/wasted.sock";
}

std::string SocketTarget(const std::string& socket_path) { return "unix:" + socket_path; }

}  // namespace waste
