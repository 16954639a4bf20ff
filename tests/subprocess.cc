#include "tests/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tests/testdata.h"

namespace waste::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

[[noreturn]] void Exec(const std::vector<std::string>& argv, const std::string& out,
                       const std::string& err) {
  int out_fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int err_fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(out_fd, 1);
  dup2(err_fd, 2);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}

int ExitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

std::string RunfilePath(const std::string& relative) {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* workspace = getenv("TEST_WORKSPACE");
  if (srcdir == nullptr || workspace == nullptr) return relative;
  return std::string(srcdir) + "/" + workspace + "/" + relative;
}

bool WaitForFile(const std::string& path, int timeout_ms) {
  for (int waited = 0; waited < timeout_ms; waited += 10) {
    if (access(path.c_str(), F_OK) == 0) return true;
    usleep(10000);
  }
  return access(path.c_str(), F_OK) == 0;
}

CommandResult RunCommand(const std::vector<std::string>& argv) {
  std::string dir = TempDir();
  std::string out = dir + "/stdout", err = dir + "/stderr";
  pid_t pid = fork();
  if (pid == 0) Exec(argv, out, err);
  int status = 0;
  waitpid(pid, &status, 0);
  return {ExitCode(status), ReadAll(out), ReadAll(err)};
}

Process::Process(const std::vector<std::string>& argv) {
  std::string dir = TempDir();
  stderr_path_ = dir + "/stderr";
  pid_ = fork();
  if (pid_ == 0) Exec(argv, dir + "/stdout", stderr_path_);
}

Process::~Process() {
  if (pid_ > 0) Stop(SIGKILL);
}

int Process::Stop(int signal) {
  if (pid_ <= 0) return -1;
  kill(pid_, signal);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return ExitCode(status);
}

std::string Process::Stderr() const { return ReadAll(stderr_path_); }

}  // namespace waste::testing
