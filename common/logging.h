// Levelled logging to stderr and CHECKs for broken invariants.
//
//   WLOG(INFO) << "serving on " << path;
//   WCHECK(slot < slots_.size()) << "slot out of range";
//
// Debian's Abseil (20220623) predates absl/log, hence this small module.
// Thread-safe: each message is written with one write(2).
#ifndef WASTE_COMMON_LOGGING_H_
#define WASTE_COMMON_LOGGING_H_

#include <sstream>
#include <string_view>

namespace waste {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kFatal = 4 };

// Messages below this level are dropped. Default kInfo.
void SetMinLogLevel(LogLevel level);
LogLevel MinLogLevel();
// Parses "debug", "info", "warning", "error"; false if unknown.
bool ParseLogLevel(std::string_view text, LogLevel* level);

class LogMessage {
 public:
  LogMessage(const char* file, int line, LogLevel level);
  ~LogMessage();  // Writes the line; aborts for kFatal.
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

// Swallows the stream when a message is disabled.
struct LogVoidify {
  void operator&(std::ostream&) {}
};

}  // namespace waste

#define WASTE_LOG_LEVEL_DEBUG ::waste::LogLevel::kDebug
#define WASTE_LOG_LEVEL_INFO ::waste::LogLevel::kInfo
#define WASTE_LOG_LEVEL_WARNING ::waste::LogLevel::kWarning
#define WASTE_LOG_LEVEL_ERROR ::waste::LogLevel::kError
#define WASTE_LOG_LEVEL_FATAL ::waste::LogLevel::kFatal

#define WLOG(severity)                                  \
  (WASTE_LOG_LEVEL_##severity < ::waste::MinLogLevel()) \
      ? (void)0                                         \
      : ::waste::LogVoidify() &                         \
            ::waste::LogMessage(__FILE__, __LINE__, WASTE_LOG_LEVEL_##severity).stream()

#define WCHECK(cond)                                                                       \
  (cond) ? (void)0                                                                         \
         : ::waste::LogVoidify() &                                                         \
               ::waste::LogMessage(__FILE__, __LINE__, ::waste::LogLevel::kFatal).stream() \
                   << "Check failed: " #cond " "

#endif  // WASTE_COMMON_LOGGING_H_
