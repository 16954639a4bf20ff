// Runs the project's binaries from tests: one-shot commands with captured
// output, and a daemon process that is stopped when the test ends.
#ifndef WASTE_TESTS_SUBPROCESS_H_
#define WASTE_TESTS_SUBPROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace waste::testing {

// Path of a binary built by Bazel and listed in the test's `data`, e.g.
// RunfilePath("daemon/wasted").
std::string RunfilePath(const std::string& relative);

struct CommandResult {
  int exit_code = -1;  // -1 if killed by a signal.
  std::string out;
  std::string err;
};

// Waits until `path` exists (a daemon's socket); false after `timeout_ms`.
bool WaitForFile(const std::string& path, int timeout_ms);

// Runs argv[0] with arguments, waits, and returns its exit code and output.
CommandResult RunCommand(const std::vector<std::string>& argv);

// A background process (the daemon). Its stderr goes to a file.
class Process {
 public:
  explicit Process(const std::vector<std::string>& argv);
  ~Process();  // SIGKILLs the process if it is still running.
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  // Sends `signal` and waits for the exit; returns the exit code, or
  // 128 + signal number if a signal ended it.
  int Stop(int signal);
  // Everything the process wrote to stderr so far.
  std::string Stderr() const;

 private:
  pid_t pid_ = -1;
  std::string stderr_path_;
};

}  // namespace waste::testing

#endif  // WASTE_TESTS_SUBPROCESS_H_
