// Server-sent events as OpenAI streams them, and the HTTP/1.1 chunked
// transfer coding they travel in:
//
//   data: {"id":"chatcmpl-...","choices":[...]}\n\n     one event per chunk
//   data: [DONE]\n\n                                    the end
//
// SseParser is the reading side, for tests and clients.
#ifndef WASTE_DAEMON_HTTP_SSE_H_
#define WASTE_DAEMON_HTTP_SSE_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace waste::http {

inline constexpr char kSseContentType[] = "text/event-stream";
inline constexpr char kSseDone[] = "data: [DONE]\n\n";

// One event carrying `payload`; a payload with newlines becomes several
// data lines (which a reader joins with "\n" again).
std::string SseEvent(absl::string_view payload);

// One chunk of the chunked transfer coding ("<hex size>\r\n<data>\r\n").
// Empty data gives "" (a zero-size chunk would end the body).
std::string HttpChunk(absl::string_view data);
// The chunk that ends a chunked body.
inline constexpr char kLastHttpChunk[] = "0\r\n\r\n";

// Splits a byte stream of server-sent events into their data payloads.
// Lines may end in \n, \r\n or \r; comment lines (":...") and fields other
// than data are skipped.
class SseParser {
 public:
  void Feed(absl::string_view bytes);
  // The payloads of events completed so far, oldest first; clears them.
  std::vector<std::string> TakeEvents();

 private:
  void Line(absl::string_view line);

  std::string pending_;  // An unfinished line.
  std::string data_;     // Data lines of the event being read.
  bool has_data_ = false;
  std::vector<std::string> events_;
};

}  // namespace waste::http

#endif  // WASTE_DAEMON_HTTP_SSE_H_
