// `wasted serve`: flags and config file -> a running daemon, until SIGTERM
// or SIGINT.
#ifndef WASTE_DAEMON_SERVE_H_
#define WASTE_DAEMON_SERVE_H_

#include <string>
#include <vector>

namespace waste {

// Returns the process exit code.
int RunServe(const std::vector<std::string>& args);

}  // namespace waste

#endif  // WASTE_DAEMON_SERVE_H_
