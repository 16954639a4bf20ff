// libFuzzer target for the HTTP face's request path up to the engine
// (tests/fuzz/run_fuzzer.sh http_request builds and runs it with clang;
// //tests/fuzz:http_request_fuzzer_test replays the committed seeds).
//
// The first byte picks the mode:
//   - even: the rest is raw bytes from a client. Boost.Beast's request
//     parser reads them with the server's limits (16 KiB of headers, 1 MiB
//     of body), as daemon/http/server.cc does; a complete request to one of
//     the completion endpoints has its body parsed as that endpoint does.
//   - odd: the rest is a request body, parsed as both /v1/chat/completions
//     and /v1/completions (bit 1 of the first byte picks which goes first).
// ParseCompletionRequest must answer every body: accepted, with every field
// inside the range it checks; or a 400 whose JSON error object parses and
// names a message. Violations abort (WCHECK), which libFuzzer reports.
#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "common/logging.h"
#include "daemon/http/api_error.h"
#include "daemon/http/openai_request.h"
#include "nlohmann/json.hpp"

namespace waste::http {
namespace {

namespace bhttp = boost::beast::http;

// The server's defaults (HttpServerOptions).
constexpr uint32_t kMaxHeaderBytes = 16 * 1024;
constexpr uint64_t kMaxBodyBytes = 1024 * 1024;

void CheckBody(ApiKind kind, absl::string_view body) {
  CompletionRequest request;
  ApiError error;
  if (!ParseCompletionRequest(kind, body, &request, &error)) {
    WCHECK(error.status == 400) << error.status << " " << error.message;
    WCHECK(!error.message.empty());
    const nlohmann::json json = nlohmann::json::parse(error.ToJson(), nullptr, false);
    WCHECK(!json.is_discarded() && json.contains("error")) << error.ToJson();
    WCHECK(json["error"]["message"] == error.message) << error.ToJson();
    return;
  }
  const v1::GenerateRequest& generate = request.generate;
  WCHECK(request.kind == kind);
  if (kind == ApiKind::kChat) WCHECK(generate.has_chat());
  if (kind == ApiKind::kCompletion) WCHECK(!generate.has_chat() && generate.max_tokens() >= 1);
  WCHECK(!generate.has_max_tokens() || generate.max_tokens() >= 1) << generate.max_tokens();
  WCHECK(generate.stop_size() <= kMaxStopSequences);
  WCHECK(generate.top_logprobs() >= 0 && generate.top_logprobs() <= 20);
  const v1::SamplingParams& s = generate.sampling();
  WCHECK(s.temperature() >= 0 && s.temperature() <= 2) << s.temperature();
  WCHECK(!s.has_top_p() || (s.top_p() >= 0 && s.top_p() <= 1)) << s.top_p();
  WCHECK(!s.has_min_p() || (s.min_p() >= 0 && s.min_p() <= 1)) << s.min_p();
  WCHECK(s.frequency_penalty() >= -2 && s.frequency_penalty() <= 2);
  WCHECK(s.presence_penalty() >= -2 && s.presence_penalty() <= 2);
  WCHECK(s.top_k() >= 0);
  // What the engine receives must survive the wire.
  v1::GenerateRequest again;
  WCHECK(again.ParseFromString(generate.SerializeAsString()));
}

void CheckHttp(absl::string_view bytes) {
  bhttp::request_parser<bhttp::string_body> parser;
  parser.header_limit(kMaxHeaderBytes);
  parser.body_limit(kMaxBodyBytes);
  parser.eager(true);
  boost::beast::error_code ec;
  size_t used = 0;
  while (used < bytes.size() && !parser.is_done()) {
    const size_t n = parser.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), ec);
    if (ec == bhttp::error::need_more) {
      if (n == 0) break;
      ec = {};
    }
    if (ec) return;  // Refused as malformed: a 400, 413 or 431 in the server.
    if (n == 0) break;
    used += n;
  }
  if (!ec && !parser.is_done() && parser.is_header_done()) {
    parser.put_eof(ec);  // The connection closed: a body without a length ends here.
  }
  if (!parser.is_header_done()) return;
  const auto& request = parser.get();
  const absl::string_view target(request.target().data(), request.target().size());
  const absl::string_view path = target.substr(0, target.find('?'));
  (void)request.keep_alive();
  (void)request[bhttp::field::authorization];
  if (!parser.is_done() || request.method() != bhttp::verb::post) return;
  WCHECK(request.body().size() <= kMaxBodyBytes);
  if (path == "/v1/chat/completions") CheckBody(ApiKind::kChat, request.body());
  if (path == "/v1/completions") CheckBody(ApiKind::kCompletion, request.body());
}

}  // namespace
}  // namespace waste::http

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using waste::http::ApiKind;
  if (size == 0) return 0;
  const absl::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((data[0] & 1) == 0) {
    waste::http::CheckHttp(rest);
    return 0;
  }
  const bool chat_first = (data[0] & 2) != 0;
  waste::http::CheckBody(chat_first ? ApiKind::kChat : ApiKind::kCompletion, rest);
  waste::http::CheckBody(chat_first ? ApiKind::kCompletion : ApiKind::kChat, rest);
  return 0;
}
