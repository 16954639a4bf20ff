#include "daemon/service/sd_notify.h"

#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>

namespace waste {

bool NotifySystemd(const std::string& state) {
  const char* path = getenv("NOTIFY_SOCKET");
  if (path == nullptr || path[0] == '\0') return false;
  size_t len = strlen(path);
  if (len >= sizeof(sockaddr_un::sun_path)) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path, len);
  // '@' names a socket in the abstract namespace.
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  socklen_t addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);
  ssize_t sent = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                        reinterpret_cast<sockaddr*>(&addr), addr_len);
  close(fd);
  return sent == static_cast<ssize_t>(state.size());
}

}  // namespace waste
