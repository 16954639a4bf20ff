#include "tests/http_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace waste::testing {
namespace {

namespace bhttp = boost::beast::http;

// Parses a whole response (the connection was closed after it).
absl::StatusOr<HttpResponse> ParseResponse(const std::string& bytes) {
  bhttp::response_parser<bhttp::string_body> parser;
  parser.eager(true);
  parser.body_limit(256u << 20);
  boost::system::error_code ec;
  size_t offset = 0;
  while (offset < bytes.size() && !parser.is_done()) {
    const size_t n =
        parser.put(boost::asio::buffer(bytes.data() + offset, bytes.size() - offset), ec);
    if (ec == bhttp::error::need_more) {
      ec = {};
      if (n == 0) break;
    } else if (ec) {
      break;
    }
    offset += n;
  }
  if (!ec && !parser.is_done()) parser.put_eof(ec);
  if (ec || !parser.is_header_done()) {
    return absl::DataLossError(
        absl::StrCat("not an HTTP response (", ec.message(), "): ", bytes.substr(0, 300)));
  }
  HttpResponse response;
  const auto& message = parser.get();
  response.status = message.result_int();
  for (const auto& field : message) {
    response.headers[absl::AsciiStrToLower(std::string(field.name_string()))] =
        std::string(field.value());
  }
  response.body = message.body();
  return response;
}

}  // namespace

RequestHeaders Bearer(const std::string& key) { return {{"Authorization", "Bearer " + key}}; }

absl::StatusOr<HttpResponse> HttpCall(int port, const std::string& method,
                                      const std::string& target, const std::string& body,
                                      const RequestHeaders& headers) {
  absl::StatusOr<std::unique_ptr<RawConnection>> connection = RawConnection::Connect(port);
  if (!connection.ok()) return connection.status();
  std::string request =
      absl::StrCat(method, " ", target, " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
  for (const auto& [name, value] : headers) absl::StrAppend(&request, name, ": ", value, "\r\n");
  if (!body.empty() || method == "POST") {
    absl::StrAppend(&request, "Content-Type: application/json\r\nContent-Length: ", body.size(),
                    "\r\n");
  }
  absl::StrAppend(&request, "\r\n", body);
  // A server that refuses early (413, 401) may close before it has read
  // everything; its answer is still there to read.
  (void)(*connection)->Send(request);
  // Nothing ends the stream but the server closing (Connection: close).
  const std::string bytes = (*connection)->ReadUntil("\x01never\x02", absl::Seconds(120));
  return ParseResponse(bytes);
}

absl::StatusOr<std::unique_ptr<RawConnection>> RawConnection::Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int error = errno;
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("connect to 127.0.0.1:", port, ": ", strerror(error)));
  }
  return std::unique_ptr<RawConnection>(new RawConnection(fd));
}

RawConnection::~RawConnection() { Close(); }

absl::Status RawConnection::Send(const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    // MSG_NOSIGNAL: a server that closed early must not kill the test.
    const ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(absl::StrCat("send: ", strerror(errno)));
    }
    sent += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

std::string RawConnection::ReadUntil(const std::string& stop, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (fd_ >= 0 && read_.find(stop) == std::string::npos) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) break;
    pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, static_cast<int>(left_ms)) <= 0) continue;
    char buffer[16384];
    const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // Closed (or reset).
    read_.append(buffer, static_cast<size_t>(n));
  }
  return read_;
}

bool RawConnection::WaitForClose(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (fd_ >= 0) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) return false;
    pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, static_cast<int>(left_ms)) <= 0) continue;
    char buffer[16384];
    const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    read_.append(buffer, static_cast<size_t>(n));
  }
  return true;
}

void RawConnection::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

}  // namespace waste::testing
