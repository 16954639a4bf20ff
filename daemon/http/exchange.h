// The seam between HTTP connections (server.cc) and what answers requests
// (router.cc, completion_stream.cc): one request, already read and within
// the limits, and the means to answer it. Tests answer requests through a
// fake Exchange, without sockets.
#ifndef WASTE_DAEMON_HTTP_EXCHANGE_H_
#define WASTE_DAEMON_HTTP_EXCHANGE_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace waste::http {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // The target without its query string.
  std::string body;
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// One request being answered. The handler answers exactly once: Respond,
// or StartStream, Writes and EndStream. Calls after the client went away
// (or after the answer) do nothing.
//
// Threading: Post and client_gone may be called from any thread; every
// other method only from the connection's strand (inside Handle, or a
// function given to Post). Post keeps working until the server is
// destroyed, which waits for every generation the engine still holds.
class Exchange {
 public:
  virtual ~Exchange() = default;

  // Runs `fn` on the connection's strand.
  virtual void Post(std::function<void()> fn) = 0;

  // A complete response; Content-Length is set.
  virtual void Respond(int status, absl::string_view content_type, std::string body,
                       const HttpHeaders& headers = {}) = 0;

  // A 200 whose body follows in Writes (chunked transfer coding).
  virtual void StartStream(absl::string_view content_type) = 0;
  // Queues `data` for the client; `written` (may be empty) runs on the
  // strand once the bytes are with the kernel, or are dropped because the
  // client went away.
  virtual void Write(std::string data, std::function<void()> written) = 0;
  virtual void EndStream() = 0;

  // Whether the client went away before the answer was complete (a read
  // saw EOF or a reset, or a write failed or timed out). Thread-safe.
  virtual bool client_gone() const = 0;
  // Runs `fn` on the strand when the client goes away before the answer is
  // complete (at once if it already has).
  virtual void OnClientGone(std::function<void()> fn) = 0;
};

}  // namespace waste::http

#endif  // WASTE_DAEMON_HTTP_EXCHANGE_H_
