// Where wasted listens by default, shared by the daemon and its clients.
#ifndef WASTE_COMMON_DEFAULT_ADDRESS_H_
#define WASTE_COMMON_DEFAULT_ADDRESS_H_

#include <string>

namespace waste {

// $XDG_RUNTIME_DIR/waste/wasted.sock; /run/waste/wasted.sock under systemd
// ($RUNTIME_DIRECTORY set, which the unit's RuntimeDirectory=waste provides)
// or when XDG_RUNTIME_DIR is unset.
std::string DefaultSocketPath();

// A gRPC target for a socket path ("unix:/path") or HOST:PORT (unchanged).
std::string SocketTarget(const std::string& socket_path);

}  // namespace waste

#endif  // WASTE_COMMON_DEFAULT_ADDRESS_H_
