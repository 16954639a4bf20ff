// A small HTTP/1.1 client for end-to-end tests of wasted's HTTP face
// (Boost.Beast, synchronous, loopback only), and a raw connection for
// tests of framing, limits and clients that misbehave.
#ifndef WASTE_TESTS_HTTP_CLIENT_H_
#define WASTE_TESTS_HTTP_CLIENT_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace waste::testing {

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // Names in lower case.
  std::string body;                            // Chunked bodies decoded.
};

using RequestHeaders = std::vector<std::pair<std::string, std::string>>;

// One request on a fresh connection to 127.0.0.1:`port`; a body is sent as
// application/json. Errors: the connection failed or the answer is not
// HTTP (with what was read).
absl::StatusOr<HttpResponse> HttpCall(int port, const std::string& method,
                                      const std::string& target, const std::string& body = "",
                                      const RequestHeaders& headers = {});

// `Authorization: Bearer key`.
RequestHeaders Bearer(const std::string& key);

// A TCP connection to 127.0.0.1:`port` that sends and reads bytes as told.
class RawConnection {
 public:
  static absl::StatusOr<std::unique_ptr<RawConnection>> Connect(int port);
  ~RawConnection();

  absl::Status Send(const std::string& bytes);
  // Reads until `stop` appears in what was read, the peer closes, or
  // `timeout` passes; returns everything read so far.
  std::string ReadUntil(const std::string& stop, absl::Duration timeout);
  // Whether the peer closed the connection within `timeout` (what it sent
  // before is read and dropped).
  bool WaitForClose(absl::Duration timeout);
  // Closes at once (a client that goes away).
  void Close();

 private:
  explicit RawConnection(int fd) : fd_(fd) {}
  int fd_;
  std::string read_;
};

}  // namespace waste::testing

#endif  // WASTE_TESTS_HTTP_CLIENT_H_
