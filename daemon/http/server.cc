#include "daemon/http/server.h"

#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "daemon/http/auth.h"
#include "daemon/http/router.h"
#include "daemon/http/sse.h"

namespace waste::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

namespace {

constexpr char kJson[] = "application/json";
// How long a connection that is being closed keeps reading (and dropping)
// what the client still sends, so the client reads our answer instead of
// a reset.
constexpr absl::Duration kLingerTime = absl::Seconds(2);

std::chrono::steady_clock::duration Chrono(absl::Duration d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      absl::ToChronoNanoseconds(d));
}

bool IsHttpParseError(const error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category();
}

}  // namespace

class Connection;

// The Exchange of one request on a connection. Calls are forwarded with
// the request's sequence number, so a late call for a finished request
// cannot touch the next one.
class ConnectionExchange final : public Exchange {
 public:
  ConnectionExchange(std::shared_ptr<Connection> connection, uint64_t seq)
      : connection_(std::move(connection)), seq_(seq) {}

  void Post(std::function<void()> fn) override;
  void Respond(int status, absl::string_view content_type, std::string body,
               const HttpHeaders& headers) override;
  void StartStream(absl::string_view content_type) override;
  void Write(std::string data, std::function<void()> written) override;
  void EndStream() override;
  bool client_gone() const override { return gone_.load(); }
  void OnClientGone(std::function<void()> fn) override {
    if (gone_.load()) {
      fn();
    } else {
      on_gone_.push_back(std::move(fn));
    }
  }

  // On the strand.
  void MarkGone() {
    if (gone_.exchange(true)) return;
    std::vector<std::function<void()>> callbacks;
    callbacks.swap(on_gone_);
    for (auto& fn : callbacks) fn();
  }

 private:
  const std::shared_ptr<Connection> connection_;
  const uint64_t seq_;
  std::atomic<bool> gone_{false};
  std::vector<std::function<void()>> on_gone_;  // Strand only.
};

class HttpServer::Impl {
 public:
  Impl(const HttpServerOptions& options, engine::Engine* engine, metrics::RequestMetrics* metrics);

  absl::Status Listen();
  void Run();
  void Shutdown(absl::Duration grace);
  void Stop();

  int port() const { return port_; }
  const HttpServerOptions& options() const { return options_; }
  Router& router() { return *router_; }
  metrics::RequestMetrics* metrics() { return metrics_; }
  bool draining() const { return draining_.load(); }
  void Remove(Connection* connection);

 private:
  void Accept();
  void OnAccept(const error_code& ec, tcp::socket socket);
  // Runs `fn` on the strand of every open connection.
  void ForEachConnection(void (Connection::*fn)());

  // First member: destroyed last, after everything that refers to it.
  asio::io_context io_;
  const HttpServerOptions options_;
  engine::Engine* const engine_;
  metrics::RequestMetrics* const metrics_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  tcp::acceptor acceptor_;
  asio::steady_timer retry_timer_;
  asio::steady_timer grace_timer_;
  asio::thread_pool blocking_;
  PendingSinks pending_;
  std::unique_ptr<Router> router_;
  std::vector<std::thread> threads_;
  std::atomic<bool> draining_{false};
  bool stopped_ = false;
  int port_ = 0;

  absl::Mutex mu_;
  std::map<Connection*, std::weak_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, HttpServer::Impl* server)
      : socket_(std::move(socket)),
        executor_(socket_.get_executor()),
        timer_(executor_),
        server_(server),
        options_(server->options()) {
    error_code ignored;
    // Synchronous peeks (PeekForGone) must never wait.
    socket_.non_blocking(true, ignored);
  }

  const asio::any_io_executor& executor() const { return executor_; }

  // Everything below runs on the connection's strand.

  void Start(bool over_limit) {
    if (over_limit) {
      Refuse(ApiError{.status = 503,
                      .type = "server_error",
                      .message = "too many connections; try again later",
                      .param = "",
                      .code = "too_many_connections"},
             {}, /*close=*/true);
      return;
    }
    AwaitRequest();
  }

  void CloseIfIdle() {
    keep_alive_ = false;
    if (phase_ == Phase::kIdle) Close();
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    DisarmTimer();
    error_code ignored;
    socket_.close(ignored);
    if (!writing_) out_.clear();
    // The answer was not complete: the handler's generation stops.
    if (std::shared_ptr<ConnectionExchange> exchange = std::move(current_)) exchange->MarkGone();
    server_->Remove(this);
  }

  // The Exchange's calls, for request `seq`.
  void Respond(uint64_t seq, int status, absl::string_view content_type, std::string body,
               const HttpHeaders& headers) {
    if (!Current(seq) || answered_ || streaming_) return;
    SendResponse(status, content_type, std::move(body), headers);
  }

  void StartStream(uint64_t seq, absl::string_view content_type) {
    if (!Current(seq) || answered_ || streaming_) return;
    streaming_ = true;
    chunked_ = version_ >= 11;
    if (!chunked_) keep_alive_ = false;  // HTTP/1.0: the body ends with the connection.
    std::string head = absl::StrCat("HTTP/", version_ / 10, ".", version_ % 10,
                                    " 200 OK\r\nServer: wasted\r\nContent-Type: ", content_type,
                                    "\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n",
                                    chunked_ ? "Transfer-Encoding: chunked\r\n" : "",
                                    keep_alive_ ? "" : "Connection: close\r\n", "\r\n");
    RecordResponse(200);
    Enqueue(std::move(head), nullptr);
  }

  void Write(uint64_t seq, std::string data, std::function<void()> written) {
    if (!Current(seq) || !streaming_ || answered_) return;
    if (data.empty()) {
      if (written) written();
      return;
    }
    Enqueue(chunked_ ? HttpChunk(data) : std::move(data), std::move(written));
  }

  void EndStream(uint64_t seq) {
    if (!Current(seq) || !streaming_ || answered_) return;
    answered_ = true;
    if (chunked_) {
      Enqueue(kLastHttpChunk, nullptr);
    } else if (!writing_) {
      OnWritesDrained();
    }
  }

 private:
  enum class Phase { kIdle, kReadingHeader, kReadingBody, kHandling, kClosing };

  bool Current(uint64_t seq) const { return !closed_ && phase_ == Phase::kHandling && seq == seq_; }

  // Waiting for the next request: the idle timeout runs until its first
  // byte arrives.
  void AwaitRequest() {
    phase_ = Phase::kIdle;
    answered_ = streaming_ = false;
    if (buffer_.size() > 0) {  // A pipelined request is already here.
      ReadHeader();
      return;
    }
    ArmTimer(options_.idle_timeout);
    StartWait();
  }

  // One readiness wait at a time; what it means depends on the phase.
  void StartWait() {
    if (wait_pending_ || closed_) return;
    wait_pending_ = true;
    socket_.async_wait(tcp::socket::wait_read,
                       [self = shared_from_this()](const error_code& ec) { self->OnReadable(ec); });
  }

  void OnReadable(const error_code& ec) {
    wait_pending_ = false;
    if (closed_) return;
    if (ec) {
      Close();
      return;
    }
    if (phase_ == Phase::kIdle) {
      ReadHeader();
    } else if (phase_ == Phase::kHandling && !answered_) {
      PeekForGone();
    }
  }

  // While a request is answered the client should send nothing: readable
  // means it closed (EOF), reset, or pipelined its next request.
  void PeekForGone() {
    char byte;
    error_code ec;
    const size_t n = socket_.receive(asio::buffer(&byte, 1), tcp::socket::message_peek, ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      StartWait();
    } else if (ec || n == 0) {
      WLOG(DEBUG) << "http: client went away during " << path_;
      Close();
    }
    // Else the next request's bytes: they stay in the socket until then.
  }

  void ReadHeader() {
    phase_ = Phase::kReadingHeader;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(options_.max_header_bytes));
    parser_->body_limit(static_cast<uint64_t>(options_.max_body_bytes));
    ArmTimer(options_.header_timeout);
    bhttp::async_read_header(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](const error_code& ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(const error_code& ec) {
    if (closed_) return;
    DisarmTimer();
    if (ec == bhttp::error::header_limit) {
      Refuse(
          {.status = 431,
           .type = "invalid_request_error",
           .message = absl::StrCat("request headers exceed ", options_.max_header_bytes, " bytes"),
           .param = "",
           .code = "headers_too_large"},
          {}, true);
      return;
    }
    if (ec == bhttp::error::body_limit) {  // Content-Length over the limit.
      Refuse(BodyTooLarge(), {}, true);
      return;
    }
    if (ec && IsHttpParseError(ec) && ec != bhttp::error::end_of_stream &&
        ec != bhttp::error::partial_message) {
      Refuse(BadRequest(absl::StrCat("malformed HTTP request: ", ec.message())), {}, true);
      return;
    }
    if (ec) {  // EOF between requests, a reset, or the timeout closed it.
      Close();
      return;
    }
    const bhttp::request<bhttp::string_body>& req = parser_->get();
    version_ = req.version();
    keep_alive_ = req.keep_alive() && !server_->draining();
    method_ = std::string(req.method_string());
    const absl::string_view target(req.target().data(), req.target().size());
    path_ = std::string(target.substr(0, target.find('?')));
    endpoint_ = Router::EndpointLabel(path_);
    const bool body_pending = !parser_->is_done();
    const beast::string_view auth = req[bhttp::field::authorization];
    if (std::optional<Refusal> refusal = server_->router().Precheck(
            method_, path_, absl::string_view(auth.data(), auth.size()))) {
      Refuse(refusal->error, refusal->headers, body_pending);
      return;
    }
    if (parser_->content_length().has_value() &&
        *parser_->content_length() > static_cast<uint64_t>(options_.max_body_bytes)) {
      Refuse(BodyTooLarge(), {}, true);
      return;
    }
    const beast::string_view expect = req[bhttp::field::expect];
    if (body_pending &&
        absl::EqualsIgnoreCase(absl::string_view(expect.data(), expect.size()), "100-continue")) {
      // The client waits for this before it sends the body (curl does for
      // bodies over 1 KiB).
      phase_ = Phase::kReadingBody;
      Enqueue("HTTP/1.1 100 Continue\r\n\r\n", [self = shared_from_this()] { self->ReadBody(); });
      return;
    }
    ReadBody();
  }

  ApiError BodyTooLarge() const {
    return {.status = 413,
            .type = "invalid_request_error",
            .message = absl::StrCat("the request body exceeds ", options_.max_body_bytes,
                                    " bytes (http_max_body_bytes)"),
            .param = "",
            .code = "request_too_large"};
  }

  void ReadBody() {
    if (closed_) return;
    phase_ = Phase::kReadingBody;
    if (parser_->is_done()) {
      Dispatch();
      return;
    }
    ArmTimer(options_.body_timeout);
    bhttp::async_read(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](const error_code& ec, size_t) { self->OnBody(ec); });
  }

  void OnBody(const error_code& ec) {
    if (closed_) return;
    DisarmTimer();
    if (ec == bhttp::error::body_limit) {
      Refuse(BodyTooLarge(), {}, true);
    } else if (ec && IsHttpParseError(ec) && ec != bhttp::error::end_of_stream &&
               ec != bhttp::error::partial_message) {
      Refuse(BadRequest(absl::StrCat("malformed HTTP request body: ", ec.message())), {}, true);
    } else if (ec) {
      Close();
    } else {
      Dispatch();
    }
  }

  void Dispatch() {
    BeginAnswer();
    HttpRequest request{.method = method_, .path = path_, .body = std::move(parser_->get().body())};
    parser_.reset();
    current_ = std::make_shared<ConnectionExchange>(shared_from_this(), seq_);
    StartWait();  // Notice a client that goes away while it waits.
    server_->router().Handle(request, current_);
  }

  void BeginAnswer() {
    phase_ = Phase::kHandling;
    ++seq_;
    answered_ = streaming_ = false;
  }

  // Answers without a handler; `close` when the request's body was not
  // read (the connection cannot be reused).
  void Refuse(const ApiError& error, const HttpHeaders& headers, bool close) {
    BeginAnswer();
    if (close) keep_alive_ = false;
    if (path_.empty()) path_ = "-";
    SendResponse(error.status, kJson, error.ToJson(), headers);
  }

  void SendResponse(int status, absl::string_view content_type, std::string body,
                    const HttpHeaders& headers) {
    answered_ = true;
    bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(status),
                                            version_ == 10 ? 10u : 11u};
    res.set(bhttp::field::server, "wasted");
    res.set(bhttp::field::content_type,
            beast::string_view(content_type.data(), content_type.size()));
    for (const auto& [name, value] : headers) res.set(name, value);
    res.body() = std::move(body);
    res.keep_alive(keep_alive_);
    res.prepare_payload();
    std::ostringstream bytes;
    bytes << res;
    RecordResponse(status);
    Enqueue(bytes.str(), nullptr);
  }

  void RecordResponse(int status) {
    if (server_->metrics() != nullptr) server_->metrics()->RecordHttpResponse(endpoint_, status);
  }

  // Writes, in order; `done` runs once its bytes are written (not when the
  // connection closes first).
  void Enqueue(std::string bytes, std::function<void()> done) {
    if (closed_) return;
    out_.push_back({std::move(bytes), std::move(done)});
    if (!writing_) WriteNext();
  }

  void WriteNext() {
    if (out_.empty() || closed_) {
      writing_ = false;
      if (closed_) out_.clear();
      if (!closed_) OnWritesDrained();
      return;
    }
    writing_ = true;
    ArmTimer(options_.write_timeout);
    asio::async_write(
        socket_, asio::buffer(out_.front().bytes),
        [self = shared_from_this()](const error_code& ec, size_t) { self->OnWrite(ec); });
  }

  void OnWrite(const error_code& ec) {
    DisarmTimer();
    if (ec || closed_) {
      writing_ = false;
      out_.clear();
      Close();
      return;
    }
    std::function<void()> done = std::move(out_.front().done);
    out_.pop_front();
    if (done) done();
    WriteNext();
  }

  // The answer's bytes are all written: the next request, or close.
  void OnWritesDrained() {
    if (phase_ != Phase::kHandling || !answered_) return;
    current_.reset();
    if (!keep_alive_ || server_->draining()) {
      LingerClose();
    } else {
      AwaitRequest();
    }
  }

  void LingerClose() {
    phase_ = Phase::kClosing;
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    ArmTimer(kLingerTime);
    Discard();
  }

  void Discard() {
    socket_.async_read_some(asio::buffer(discard_),
                            [self = shared_from_this()](const error_code& ec, size_t) {
                              if (ec || self->closed_) {
                                self->Close();
                              } else {
                                self->Discard();
                              }
                            });
  }

  void ArmTimer(absl::Duration timeout) {
    const uint64_t generation = ++timer_generation_;
    timer_.expires_after(Chrono(timeout));
    timer_.async_wait([self = shared_from_this(), generation](const error_code& ec) {
      if (ec || generation != self->timer_generation_ || self->closed_) return;
      WLOG(DEBUG) << "http: connection timed out";
      self->Close();
    });
  }

  void DisarmTimer() {
    ++timer_generation_;
    timer_.cancel();
  }

  struct Pending {
    std::string bytes;
    std::function<void()> done;
  };

  tcp::socket socket_;
  const asio::any_io_executor executor_;  // The connection's strand.
  asio::steady_timer timer_;
  uint64_t timer_generation_ = 0;
  HttpServer::Impl* const server_;
  const HttpServerOptions& options_;

  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  char discard_[4096];

  Phase phase_ = Phase::kIdle;
  bool closed_ = false;
  bool wait_pending_ = false;
  bool keep_alive_ = true;
  unsigned version_ = 11;
  std::string method_, path_, endpoint_ = "other";

  // The request being answered.
  uint64_t seq_ = 0;
  std::shared_ptr<ConnectionExchange> current_;
  bool answered_ = false;  // All of the answer is queued.
  bool streaming_ = false;
  bool chunked_ = false;

  std::deque<Pending> out_;
  bool writing_ = false;
};

void ConnectionExchange::Post(std::function<void()> fn) {
  asio::post(connection_->executor(), std::move(fn));
}

void ConnectionExchange::Respond(int status, absl::string_view content_type, std::string body,
                                 const HttpHeaders& headers) {
  connection_->Respond(seq_, status, content_type, std::move(body), headers);
}

void ConnectionExchange::StartStream(absl::string_view content_type) {
  connection_->StartStream(seq_, content_type);
}

void ConnectionExchange::Write(std::string data, std::function<void()> written) {
  connection_->Write(seq_, std::move(data), std::move(written));
}

void ConnectionExchange::EndStream() { connection_->EndStream(seq_); }

HttpServer::Impl::Impl(const HttpServerOptions& options, engine::Engine* engine,
                       metrics::RequestMetrics* metrics)
    : options_(options),
      engine_(engine),
      metrics_(metrics),
      work_(asio::make_work_guard(io_)),
      acceptor_(asio::make_strand(io_)),
      retry_timer_(acceptor_.get_executor()),
      grace_timer_(acceptor_.get_executor()),
      blocking_(static_cast<size_t>(std::max(1, options.blocking_threads))) {
  router_ = std::make_unique<Router>(RouterContext{
      .engine = engine_,
      .metrics = metrics_,
      .pending = &pending_,
      .api_key = options_.api_key,
      .run_blocking = [this](std::function<void()> fn) { asio::post(blocking_, std::move(fn)); },
      .started = absl::Now()});
}

absl::Status HttpServer::Impl::Listen() {
  absl::StatusOr<HostPort> address = SplitHostPort(options_.listen);
  if (!address.ok()) return address.status();
  error_code ec;
  tcp::endpoint endpoint;
  if (address->host.empty()) {
    endpoint = tcp::endpoint(tcp::v4(), static_cast<uint16_t>(address->port));
  } else {
    asio::ip::address ip = asio::ip::make_address(address->host, ec);
    if (ec) {
      // A host name: resolved once, at start.
      tcp::resolver resolver(io_);
      auto results = resolver.resolve(address->host, std::to_string(address->port), ec);
      if (ec || results.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("cannot resolve ", address->host, " (",
                                                       options_.listen, "): ", ec.message()));
      }
      endpoint = results.begin()->endpoint();
    } else {
      endpoint = tcp::endpoint(ip, static_cast<uint16_t>(address->port));
    }
  }
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for HTTP on ", options_.listen, ": ", ec.message()));
  }
  port_ = acceptor_.local_endpoint().port();
  return absl::OkStatus();
}

void HttpServer::Impl::Run() {
  asio::dispatch(acceptor_.get_executor(), [this] { Accept(); });
  for (int i = 0; i < std::max(1, options_.io_threads); ++i) {
    threads_.emplace_back([this] {
      // A handler that throws (out of memory, say) loses its connection,
      // not the daemon's HTTP face.
      for (;;) {
        try {
          io_.run();
          return;
        } catch (const std::exception& e) {
          WLOG(ERROR) << "http: " << e.what();
        }
      }
    });
  }
}

void HttpServer::Impl::Accept() {
  acceptor_.async_accept(asio::make_strand(io_), [this](const error_code& ec, tcp::socket socket) {
    OnAccept(ec, std::move(socket));
  });
}

void HttpServer::Impl::OnAccept(const error_code& ec, tcp::socket socket) {
  if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
  if (ec) {
    // Out of descriptors, say: try again shortly rather than spin.
    WLOG(WARNING) << "http: accept failed: " << ec.message();
    retry_timer_.expires_after(std::chrono::milliseconds(100));
    retry_timer_.async_wait([this](const error_code& wait_ec) {
      if (!wait_ec && acceptor_.is_open()) Accept();
    });
    return;
  }
  auto connection = std::make_shared<Connection>(std::move(socket), this);
  bool over_limit;
  {
    absl::MutexLock lock(&mu_);
    over_limit = static_cast<int>(connections_.size()) >= options_.max_connections;
    connections_[connection.get()] = connection;
  }
  if (metrics_ != nullptr) metrics_->RecordHttpConnection(over_limit);
  asio::dispatch(connection->executor(),
                 [connection, over_limit] { connection->Start(over_limit); });
  Accept();
}

void HttpServer::Impl::Remove(Connection* connection) {
  {
    absl::MutexLock lock(&mu_);
    connections_.erase(connection);
  }
  if (metrics_ != nullptr) metrics_->HttpConnectionClosed();
}

void HttpServer::Impl::ForEachConnection(void (Connection::*fn)()) {
  std::vector<std::shared_ptr<Connection>> open;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [raw, weak] : connections_) {
      if (std::shared_ptr<Connection> connection = weak.lock()) open.push_back(connection);
    }
  }
  for (std::shared_ptr<Connection>& connection : open) {
    asio::post(connection->executor(), [connection, fn] { ((*connection).*fn)(); });
  }
}

void HttpServer::Impl::Shutdown(absl::Duration grace) {
  if (draining_.exchange(true)) return;
  router_->set_draining();
  asio::post(acceptor_.get_executor(), [this, grace] {
    error_code ignored;
    acceptor_.close(ignored);
    retry_timer_.cancel();
    ForEachConnection(&Connection::CloseIfIdle);
    grace_timer_.expires_after(Chrono(grace));
    grace_timer_.async_wait([this](const error_code& ec) {
      if (!ec) ForEachConnection(&Connection::Close);
    });
  });
}

void HttpServer::Impl::Stop() {
  if (stopped_) return;
  stopped_ = true;
  Shutdown(absl::ZeroDuration());
  // Connections close themselves once the grace timer fires; what they
  // answered is then cancelled in the engine.
  {
    absl::MutexLock lock(&mu_);
    const bool closed = mu_.AwaitWithTimeout(
        absl::Condition(
            +[](std::map<Connection*, std::weak_ptr<Connection>>* c) { return c->empty(); },
            &connections_),
        absl::Seconds(30));
    if (!closed) WLOG(WARNING) << "http: connections still open at shutdown";
  }
  // Model loads in flight finish (their clients are gone: nothing runs).
  blocking_.join();
  // The engine lets go of every sink (cancelled ones at the next step).
  pending_.WaitForNone();
  work_.reset();
  io_.stop();
  for (std::thread& thread : threads_) thread.join();
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              engine::Engine* engine,
                                                              metrics::RequestMetrics* metrics) {
  auto impl = std::make_unique<Impl>(options, engine, metrics);
  if (absl::Status status = impl->Listen(); !status.ok()) return status;
  impl->Run();
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { impl_->Stop(); }

void HttpServer::Shutdown(absl::Duration grace) { impl_->Shutdown(grace); }

int HttpServer::port() const { return impl_->port(); }

}  // namespace waste::http
