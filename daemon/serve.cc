#include "daemon/serve.h"

#include <signal.h>
#include <string.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <functional>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "common/cli_args.h"
#include "common/logging.h"
#include "common/process_memory.h"
#include "daemon/config/config.h"
#include "daemon/engine/model_catalog.h"
#include "daemon/http/auth.h"
#include "daemon/http/server.h"
#include "daemon/metrics/request_metrics.h"
#include "daemon/read_faults.h"
#include "daemon/service/sd_notify.h"
#include "daemon/service/server.h"
#include "daemon/service/version.h"
#include "daemon/service/waste_service.h"

namespace waste {
namespace {

constexpr char kServeUsage[] = R"(usage: wasted serve [flags]

Serves the waste.v1 gRPC API on a Unix socket (and optionally TCP), and
optionally an OpenAI-compatible HTTP API with Prometheus /metrics.

flags (each overrides the config file):
  --config FILE        TOML config (see deploy/wasted.toml); default none
  --socket PATH        Unix socket; default $XDG_RUNTIME_DIR/waste/wasted.sock,
                       or /run/waste/wasted.sock under systemd
  --models-dir DIR     a directory of *.gguf models (repeatable)
  --follow-symlinks    also serve model symlinks that point outside the models
                       directories (skipped by default)
  --listen HOST:PORT   also serve gRPC on TCP (prefer loopback)
  --http-listen HOST:PORT  serve the HTTP API (/v1/chat/completions,
                       /v1/completions, /v1/models, /metrics, /health);
                       default off; prefer loopback, e.g. 127.0.0.1:8080
  --api-key-file FILE  require `Authorization: Bearer KEY` (KEY: the file's
                       first line) on HTTP (but /health) and gRPC over TCP
  --api-key KEY        the same, from the command line (visible in ps)
  --allow-unauthenticated-remote  serve a non-loopback address without a key
  --log-level LEVEL    debug, info, warning or error
  --state-dir DIR      persistent state (expert hotlists); default
                       $STATE_DIRECTORY, $XDG_STATE_HOME/waste or ~/.local/state/waste

model defaults (the config's [model_defaults]; [models.NAME] still wins):
  --ram-budget SIZE    RAM per model: weights, pool, KV cache, scratch ("8GiB")
  --vram-budget SIZE   GPU memory per model ("6GiB"): the trunk and hottest
                       experts run there (needs a --config=cuda build and a
                       GPU; otherwise logged and ignored)
  --ctx N              context window in tokens
  --prefetch-depth N   chunks read ahead of the computation
  --io-depth N         reads in flight
  --io-threads N       pread threads when io_uring is unavailable
  --io-engine E        auto, io_uring, threads or pread
  --cache-policy P     lru or lfu
  --threads N          compute threads
  --kv-type T          f16 or f32
  --max-concurrent-requests N  requests one model runs together in a batch
                       (KV caches reserved for each; default 4, at most 32)
  --max-queued-requests N      requests that may wait; more are refused
                       with RESOURCE_EXHAUSTED (default 64)
  --prefill-chunk N    prompt tokens per step (default 32, at most 64)

testing only:
  --inject-read-faults RATE[:SEED]  make that fraction of model file reads
                       fail (EIO, some past every retry), come back short or
                       slow; the counts are logged at exit
)";

// Applies the model-default flags to `defaults`.
absl::Status ApplyModelFlags(const ParsedArgs& args, v1::ModelConfig* defaults) {
  if (auto budget = args.Get("ram-budget")) {
    absl::StatusOr<int64_t> bytes = ParseByteSize(*budget);
    if (!bytes.ok()) return bytes.status();
    defaults->set_ram_budget_bytes(*bytes);
  }
  if (auto budget = args.Get("vram-budget")) {
    absl::StatusOr<int64_t> bytes = ParseByteSize(*budget);
    if (!bytes.ok()) return bytes.status();
    defaults->set_vram_budget_bytes(*bytes);
  }
  struct IntFlag {
    const char* name;
    void (v1::ModelConfig::*set)(int32_t);
  };
  static const IntFlag kInts[] = {
      {"ctx", &v1::ModelConfig::set_context_length},
      {"prefetch-depth", &v1::ModelConfig::set_prefetch_depth},
      {"io-depth", &v1::ModelConfig::set_io_depth},
      {"io-threads", &v1::ModelConfig::set_io_threads},
      {"threads", &v1::ModelConfig::set_threads},
      {"max-concurrent-requests", &v1::ModelConfig::set_max_concurrent_requests},
      {"prefill-chunk", &v1::ModelConfig::set_prefill_chunk}};
  for (const IntFlag& flag : kInts) {
    if (!args.Has(flag.name)) continue;
    absl::StatusOr<int64_t> value = args.GetInt(flag.name, 0);
    if (!value.ok()) return value.status();
    if (*value <= 0)
      return absl::InvalidArgumentError(absl::StrCat("--", flag.name, " must be positive"));
    (defaults->*flag.set)(static_cast<int32_t>(*value));
  }
  if (args.Has("max-queued-requests")) {
    absl::StatusOr<int64_t> value = args.GetInt("max-queued-requests", 0);
    if (!value.ok()) return value.status();
    if (*value < 0) return absl::InvalidArgumentError("--max-queued-requests must be >= 0");
    defaults->set_max_queued_requests(static_cast<int32_t>(*value));
  }
  if (auto engine = args.Get("io-engine")) defaults->set_io_engine(*engine);
  if (auto policy = args.Get("cache-policy")) {
    if (*policy == "lru") {
      defaults->set_cache_policy(v1::CACHE_POLICY_LRU);
    } else if (*policy == "lfu") {
      defaults->set_cache_policy(v1::CACHE_POLICY_LFU);
    } else {
      return absl::InvalidArgumentError("--cache-policy must be lru or lfu");
    }
  }
  if (auto kv = args.Get("kv-type")) {
    if (*kv == "f16") {
      defaults->set_kv_cache_type(v1::KV_CACHE_TYPE_F16);
    } else if (*kv == "f32") {
      defaults->set_kv_cache_type(v1::KV_CACHE_TYPE_F32);
    } else {
      return absl::InvalidArgumentError("--kv-type must be f16 or f32");
    }
  }
  return absl::OkStatus();
}

// The HTTP face's settings: the config's, else HttpServerOptions' defaults.
http::HttpServerOptions HttpOptions(const v1::DaemonConfig& config, const std::string& api_key) {
  http::HttpServerOptions options;
  options.listen = config.http_listen();
  options.api_key = api_key;
  if (config.has_http_max_body_bytes()) options.max_body_bytes = config.http_max_body_bytes();
  if (config.has_http_max_connections()) options.max_connections = config.http_max_connections();
  if (config.has_http_header_timeout_seconds()) {
    options.header_timeout = absl::Seconds(config.http_header_timeout_seconds());
  }
  if (config.has_http_body_timeout_seconds()) {
    options.body_timeout = absl::Seconds(config.http_body_timeout_seconds());
  }
  if (config.has_http_idle_timeout_seconds()) {
    options.idle_timeout = absl::Seconds(config.http_idle_timeout_seconds());
  }
  if (config.has_http_write_timeout_seconds()) {
    options.write_timeout = absl::Seconds(config.http_write_timeout_seconds());
  }
  return options;
}

absl::StatusOr<v1::DaemonConfig> BuildConfig(const ParsedArgs& args) {
  v1::DaemonConfig config;
  if (std::optional<std::string> path = args.Get("config")) {
    absl::StatusOr<v1::DaemonConfig> loaded = LoadDaemonConfig(*path);
    if (!loaded.ok()) return loaded.status();
    config = *std::move(loaded);
  }
  if (auto socket = args.Get("socket")) config.set_socket(*socket);
  if (auto listen = args.Get("listen")) config.set_listen(*listen);
  if (auto http = args.Get("http-listen")) config.set_http_listen(*http);
  if (auto key = args.Get("api-key")) {
    config.set_api_key(*key);
    config.clear_api_key_file();
  }
  if (auto file = args.Get("api-key-file")) {
    config.set_api_key_file(*file);
    config.clear_api_key();
  }
  if (args.Has("allow-unauthenticated-remote")) config.set_allow_unauthenticated_remote(true);
  if (auto level = args.Get("log-level")) config.set_log_level(*level);
  if (auto state = args.Get("state-dir")) config.set_state_dir(*state);
  if (absl::Status status = ApplyModelFlags(args, config.mutable_model_defaults()); !status.ok()) {
    return status;
  }
  if (args.Has("follow-symlinks")) config.set_follow_symlinks(true);
  std::vector<std::string> dirs = args.GetAll("models-dir");
  if (!dirs.empty()) {
    config.clear_models_dirs();
    for (const std::string& dir : dirs) config.add_models_dirs(dir);
  }
  ApplyDaemonDefaults(&config);
  return config;
}

// SIGHUP: reads the config file again (flags still win) and applies what
// can change while serving: log_level, default_model, model_defaults and
// [models.*] sections, max_concurrent_requests, max_queued_requests and
// max_saved_sessions_bytes (models loaded from then on take them; loaded
// ones keep theirs until reloaded). The models directories are scanned
// afresh on every listing anyway; the count is logged. Other keys need a
// restart and are reported when they changed.
void Reload(const ParsedArgs& args, engine::Engine* engine) {
  absl::StatusOr<v1::DaemonConfig> fresh = BuildConfig(args);
  if (!fresh.ok()) {
    WLOG(WARNING) << "SIGHUP: keeping the running configuration: " << fresh.status().message();
    return;
  }
  LogLevel level;
  if (!ParseLogLevel(fresh->log_level(), &level)) {
    WLOG(WARNING) << "SIGHUP: keeping the running configuration: unknown log level '"
                  << fresh->log_level() << "'";
    return;
  }
  const v1::DaemonConfig running = engine->config();
  v1::DaemonConfig live = running;
  live.set_log_level(fresh->log_level());
  live.set_default_model(fresh->default_model());
  *live.mutable_model_defaults() = fresh->model_defaults();
  *live.mutable_models() = fresh->models();
  live.set_max_concurrent_requests(fresh->max_concurrent_requests());
  live.set_max_queued_requests(fresh->max_queued_requests());
  live.set_max_saved_sessions_bytes(fresh->max_saved_sessions_bytes());
  // What differs besides those needs a restart.
  v1::DaemonConfig rest = *fresh;
  rest.clear_log_level();
  rest.clear_default_model();
  rest.clear_model_defaults();
  rest.clear_models();
  rest.clear_max_concurrent_requests();
  rest.clear_max_queued_requests();
  rest.clear_max_saved_sessions_bytes();
  v1::DaemonConfig running_rest = running;
  running_rest.clear_log_level();
  running_rest.clear_default_model();
  running_rest.clear_model_defaults();
  running_rest.clear_models();
  running_rest.clear_max_concurrent_requests();
  running_rest.clear_max_queued_requests();
  running_rest.clear_max_saved_sessions_bytes();
  if (rest.SerializeAsString() != running_rest.SerializeAsString()) {
    WLOG(WARNING) << "SIGHUP: socket, listen, http_*, api_key*, models_dirs, state_dir or "
                     "follow_symlinks changed; they take effect after a restart";
  }
  SetMinLogLevel(level);
  engine->Reconfigure(live);
  WLOG(INFO) << "SIGHUP: configuration reloaded (log level " << live.log_level()
             << "; model settings apply to models loaded from now on); "
             << engine->catalog().Scan().size() << " model(s) in the models directories";
}

}  // namespace

int RunServe(const std::vector<std::string>& raw_args) {
  ConfigureDaemonHeap();  // Before any thread: RSS that follows use over days.
  absl::StatusOr<ParsedArgs> args = ParseArgs(raw_args, {{"config"},
                                                         {"socket"},
                                                         {"models-dir"},
                                                         {"follow-symlinks", false},
                                                         {"listen"},
                                                         {"http-listen"},
                                                         {"api-key"},
                                                         {"api-key-file"},
                                                         {"allow-unauthenticated-remote", false},
                                                         {"log-level"},
                                                         {"state-dir"},
                                                         {"ram-budget"},
                                                         {"vram-budget"},
                                                         {"ctx"},
                                                         {"prefetch-depth"},
                                                         {"io-depth"},
                                                         {"io-threads"},
                                                         {"io-engine"},
                                                         {"cache-policy"},
                                                         {"threads"},
                                                         {"kv-type"},
                                                         {"max-concurrent-requests"},
                                                         {"max-queued-requests"},
                                                         {"prefill-chunk"},
                                                         {"inject-read-faults"},
                                                         {"help", false}});
  if (!args.ok()) {
    std::cerr << "wasted serve: " << args.status().message() << "\n\n" << kServeUsage;
    return 2;
  }
  if (args->Has("help")) {
    std::cout << kServeUsage;
    return 0;
  }
  if (!args->positional().empty()) {
    std::cerr << "wasted serve: unexpected argument '" << args->positional()[0] << "'\n";
    return 2;
  }
  absl::StatusOr<v1::DaemonConfig> config = BuildConfig(*args);
  if (!config.ok()) {
    std::cerr << "wasted serve: " << config.status().message() << "\n";
    return 2;
  }
  LogLevel level;
  if (!ParseLogLevel(config->log_level(), &level)) {
    std::cerr << "wasted serve: unknown log level '" << config->log_level()
              << "' (use debug, info, warning or error)\n";
    return 2;
  }
  SetMinLogLevel(level);

  std::vector<std::string> dirs(config->models_dirs().begin(), config->models_dirs().end());
  if (dirs.empty()) WLOG(WARNING) << "no models directories configured (--models-dir)";
  ModelCatalog catalog(dirs, config->follow_symlinks());
  if (absl::Status status = catalog.Validate(); !status.ok()) {
    WLOG(ERROR) << status.message();
    return 1;
  }

  absl::StatusOr<std::string> api_key = http::LoadApiKey(*config);
  if (!api_key.ok()) {
    WLOG(ERROR) << api_key.status().message();
    return 1;
  }
  if (absl::Status status = http::CheckRemoteListenersHaveKey(*config, *api_key); !status.ok()) {
    WLOG(ERROR) << status.message();
    return 1;
  }

  // Declared before the servers, so it outlives everything that feeds it.
  metrics::RequestMetrics request_metrics;
  // Declared before the engine, so it outlives every read.
  std::unique_ptr<ReadFaultInjection> read_faults;
  if (std::optional<std::string> spec = args->Get("inject-read-faults")) {
    absl::StatusOr<storage::RandomFaults> faults = ParseReadFaults(*spec);
    if (!faults.ok()) {
      std::cerr << "wasted serve: " << faults.status().message() << "\n";
      return 2;
    }
    read_faults = std::make_unique<ReadFaultInjection>(storage::Env::Default(), *faults);
  }
  // The signal handlers exist before anything serves: a SIGTERM that comes
  // as soon as the socket answers waits for io.run() below instead of
  // killing the daemon.
  boost::asio::io_context io;
  boost::asio::signal_set hangups(io, SIGHUP);
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  engine::Engine engine(read_faults != nullptr ? read_faults->env() : storage::Env::Default(),
                        &catalog, *config);
  WasteService service(&engine, {.metrics = &request_metrics, .api_key = *api_key});
  absl::StatusOr<std::unique_ptr<Server>> server =
      Server::Start({.socket_path = config->socket(),
                     .listen = config->listen(),
                     .tcp_requires_key = !api_key->empty()},
                    {&service});
  if (!server.ok()) {
    WLOG(ERROR) << server.status().message();
    return 1;
  }
  std::unique_ptr<http::HttpServer> http_server;
  if (!config->http_listen().empty()) {
    absl::StatusOr<std::unique_ptr<http::HttpServer>> started =
        http::HttpServer::Start(HttpOptions(*config, *api_key), &engine, &request_metrics);
    if (!started.ok()) {
      WLOG(ERROR) << started.status().message();
      (*server)->Shutdown(absl::ZeroDuration());
      return 1;
    }
    http_server = *std::move(started);
  }
  // Tests started with port 0 read the bound ports from these lines.
  WLOG(INFO) << "wasted " << kWasteVersion << " serving on unix:" << config->socket()
             << (config->listen().empty() ? ""
                                          : absl::StrCat(" and ", config->listen(), " (tcp port ",
                                                         (*server)->tcp_port(), ")"))
             << " with " << catalog.Scan().size() << " model(s)"
             << (api_key->empty() ? "" : "; TCP and HTTP calls need the API key");
  if (http_server != nullptr) {
    absl::StatusOr<http::HostPort> host = http::SplitHostPort(config->http_listen());
    const std::string name = host.ok() && host->host.find(':') != std::string::npos
                                 ? absl::StrCat("[", host->host, "]")
                                 : (host.ok() ? host->host : std::string());
    WLOG(INFO) << "serving HTTP on http://" << name << ":" << http_server->port();
  }
  NotifySystemd("READY=1\nSTATUS=serving");

  std::function<void()> await_hangup = [&] {
    hangups.async_wait([&](const boost::system::error_code& error, int) {
      if (error) return;
      Reload(*args, &engine);
      await_hangup();
    });
  };
  await_hangup();
  signals.async_wait([&](const boost::system::error_code& error, int signal_number) {
    if (error) return;
    hangups.cancel();
    WLOG(INFO) << "received " << strsignal(signal_number) << ", shutting down";
    NotifySystemd("STOPPING=1");
    if (http_server != nullptr) http_server->Shutdown(absl::Seconds(5));
    (*server)->Shutdown(absl::Seconds(5));
  });
  io.run();
  (*server)->Wait();
  http_server.reset();  // Waits for its connections and the engine's requests.
  WLOG(INFO) << "stopped";
  return 0;
}

}  // namespace waste
