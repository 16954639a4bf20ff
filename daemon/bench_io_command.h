// `wasted bench-io FILE`: this disk's read bandwidth through waste's reader,
// the limit every streaming figure is quoted against.
#ifndef WASTE_DAEMON_BENCH_IO_COMMAND_H_
#define WASTE_DAEMON_BENCH_IO_COMMAND_H_

#include <string>
#include <vector>

namespace waste {

// Returns the process exit code.
int RunBenchIoCommand(const std::vector<std::string>& args);

}  // namespace waste

#endif  // WASTE_DAEMON_BENCH_IO_COMMAND_H_
