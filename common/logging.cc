#include "common/logging.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
#include <string>

namespace waste {
namespace {

std::atomic<int> min_level{static_cast<int>(LogLevel::kInfo)};

char LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return 'D';
    case LogLevel::kInfo:
      return 'I';
    case LogLevel::kWarning:
      return 'W';
    case LogLevel::kError:
      return 'E';
    case LogLevel::kFatal:
      return 'F';
  }
  return '?';
}

std::string_view Basename(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

void SetMinLogLevel(LogLevel level) { min_level.store(static_cast<int>(level)); }

LogLevel MinLogLevel() { return static_cast<LogLevel>(min_level.load()); }

bool ParseLogLevel(std::string_view text, LogLevel* level) {
  if (text == "debug")
    *level = LogLevel::kDebug;
  else if (text == "info")
    *level = LogLevel::kInfo;
  else if (text == "warning" || text == "warn")
    *level = LogLevel::kWarning;
  else if (text == "error")
    *level = LogLevel::kError;
  else
    return false;
  return true;
}

LogMessage::LogMessage(const char* file, int line, LogLevel level) : level_(level) {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  tm local;
  localtime_r(&now.tv_sec, &local);
  char stamp[32];
  strftime(stamp, sizeof(stamp), "%m%d %H:%M:%S", &local);
  char millis[24];
  snprintf(millis, sizeof(millis), ".%03ld", now.tv_nsec / 1000000);
  stream_ << LevelLetter(level) << stamp << millis << ' ' << Basename(file) << ':' << line << "] ";
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  std::string line = stream_.str();
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
  if (level_ == LogLevel::kFatal) abort();
}

}  // namespace waste
