#include "daemon/http/auth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace waste::http {

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  // Every byte of the longer string is looked at whatever the contents;
  // the difference of lengths joins the accumulated difference.
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= x ^ y;
  }
  // Keep the compiler from turning the loop into an early-exit compare.
  volatile unsigned char result = diff;
  return result == 0;
}

std::optional<absl::string_view> BearerToken(absl::string_view authorization) {
  authorization = absl::StripAsciiWhitespace(authorization);
  constexpr absl::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(authorization.substr(0, kScheme.size()), kScheme)) {
    return std::nullopt;
  }
  return absl::StripAsciiWhitespace(authorization.substr(kScheme.size()));
}

bool Authorized(absl::string_view api_key, absl::string_view authorization) {
  if (api_key.empty()) return true;
  std::optional<absl::string_view> token = BearerToken(authorization);
  return token.has_value() && ConstantTimeEquals(*token, api_key);
}

absl::StatusOr<HostPort> SplitHostPort(absl::string_view address) {
  HostPort out;
  absl::string_view port;
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return absl::InvalidArgumentError(absl::StrCat("address '", address, "' is not [IPv6]:PORT"));
    }
    out.host = std::string(address.substr(1, close - 1));
    port = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("address '", address, "' is not HOST:PORT (e.g. 127.0.0.1:8080)"));
    }
    out.host = std::string(address.substr(0, colon));
    port = address.substr(colon + 1);
  }
  if (!absl::SimpleAtoi(port, &out.port) || out.port < 0 || out.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", address, "' has no valid port (0..65535)"));
  }
  return out;
}

bool IsLoopbackListen(absl::string_view address) {
  absl::StatusOr<HostPort> split = SplitHostPort(address);
  if (!split.ok()) return false;
  const std::string& host = split->host;
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

absl::StatusOr<std::string> LoadApiKey(const v1::DaemonConfig& config) {
  if (!config.api_key().empty() && !config.api_key_file().empty()) {
    return absl::InvalidArgumentError("set api_key or api_key_file, not both");
  }
  if (!config.api_key().empty()) {
    std::string key(absl::StripAsciiWhitespace(config.api_key()));
    if (key.empty()) return absl::InvalidArgumentError("api_key is blank");
    return key;
  }
  if (config.api_key_file().empty()) return std::string();
  std::ifstream in(config.api_key_file());
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read api_key_file ", config.api_key_file(), ": ", strerror(errno)));
  }
  std::string line;
  std::getline(in, line);
  std::string key(absl::StripAsciiWhitespace(line));
  if (key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("api_key_file ", config.api_key_file(), " has no key on its first line"));
  }
  return key;
}

absl::Status CheckRemoteListenersHaveKey(const v1::DaemonConfig& config,
                                         absl::string_view api_key) {
  if (!api_key.empty() || config.allow_unauthenticated_remote()) return absl::OkStatus();
  for (const std::string* address : {&config.listen(), &config.http_listen()}) {
    if (address->empty() || IsLoopbackListen(*address)) continue;
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to listen on ", *address,
        " without an API key: it is reachable from other machines. Set api_key_file (or "
        "--api-key-file), listen on 127.0.0.1, or set allow_unauthenticated_remote = true"));
  }
  return absl::OkStatus();
}

}  // namespace waste::http
