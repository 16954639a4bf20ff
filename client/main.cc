// waste-client: the command-line client of the waste daemon.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/generate_command.h"
#include "client/run_command.h"
#include "client/waste_client.h"
#include "common/cli_args.h"
#include "common/format.h"
#include "google/protobuf/util/json_util.h"

namespace waste {
namespace {

constexpr char kUsage[] =
    R"(usage: waste-client [--socket PATH | --address HOST:PORT] [--api-key KEY] <command> [args]

commands:
  health                  is the daemon serving? (prints SERVING)
  models [--json]         the models the daemon can serve
  ps [--json]             loaded models: RAM, sessions, running and queued requests
  run [--system T] MODEL  an interactive chat (one daemon session; /bye, /clear; --no-think,
                          --reasoning-effort E: see run --help)
  generate [flags] PROMPT stream a continuation of PROMPT (see generate --help)
  chat [flags] MESSAGE    one chat turn through the model's template
  tokenize --model M TEXT token ids of TEXT
  plan [--model M] [--ram-budget SIZE] [--vram-budget SIZE] [--ctx N] [--sessions N] [--json]
                          how a model fits a RAM budget (floor, recommended, bytes/token)
  load MODEL / unload [--force] MODEL
                          --force cancels the model's running requests
  stats [--json]          daemon statistics
  save-session [--model M] ID
                          write session ID to the daemon's state directory
                          (a later request with its id continues it, even
                          after a restart; see generate --keep-session)

--api-key (or $WASTE_API_KEY) is sent with every call: a daemon with an API
key wants it over TCP (the Unix socket never needs it).
The daemon is found at --socket, else --address, else $WASTE_ADDRESS, else
$XDG_RUNTIME_DIR/waste/wasted.sock (/run/waste/wasted.sock without it).
)";

constexpr size_t kMaxSocketPath = 107;  // sizeof(sockaddr_un::sun_path) - 1

int SaveSession(WasteClient& client, const std::vector<std::string>& raw) {
  auto args = ParseArgs(raw, {{"model"}});
  if (!args.ok() || args->positional().size() != 1) {
    std::cerr << "usage: waste-client save-session [--model NAME] SESSION_ID\n";
    return 2;
  }
  v1::SaveSessionRequest request;
  request.set_model(args->GetOr("model", ""));
  request.set_session_id(args->positional()[0]);
  auto response = client.SaveSession(request);
  if (!response.ok()) return FailCall(client, response.status());
  std::cout << absl::StrFormat("saved %s: %d tokens, %s in %s\n", request.session_id(),
                               response->tokens(), FormatBytes(response->bytes()),
                               response->path());
  return 0;
}

int Health(WasteClient& client) {
  auto status = client.Health();
  if (!status.ok()) return FailCall(client, status.status());
  std::cout << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(*status) << "\n";
  return *status == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

// Wants --json (the command's only flag when `only_json`)? Exit code 2 and
// a usage line for anything else.
absl::StatusOr<bool> JsonFlag(const std::vector<std::string>& raw, const std::string& command) {
  auto args = ParseArgs(raw, {{"json", false}});
  if (!args.ok() || !args->positional().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("usage: waste-client ", command, " [--json]"));
  }
  return args->Has("json");
}

// A response as JSON (field names as in the .proto files, every field).
int PrintJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) {
    std::cerr << "waste-client: cannot print the response as JSON\n";
    return 1;
  }
  std::cout << json;
  return 0;
}

int Models(WasteClient& client, bool json) {
  auto models = client.ListModels();
  if (!models.ok()) return FailCall(client, models.status());
  if (json) return PrintJson(*models);
  if (models->models().empty()) {
    std::cout << "no models (the daemon serves *.gguf files under its --models-dir)\n";
    return 0;
  }
  size_t width = 4;
  for (const v1::ModelInfo& model : models->models()) width = std::max(width, model.name().size());
  std::cout << absl::StrFormat("%-*s  %-10s %-6s %8s  %10s  %14s  %s\n", width, "NAME", "ARCH",
                               "TYPE", "PARAMS", "SIZE", "BYTES", "PATH");
  for (const v1::ModelInfo& model : models->models()) {
    std::cout << absl::StrFormat("%-*s  %-10s %-6s %8s  %10s  %14d  %s%s\n", width, model.name(),
                                 model.architecture().empty() ? "?" : model.architecture(),
                                 model.quantization().empty() ? "?" : model.quantization(),
                                 FormatCount(model.parameters()), FormatBytes(model.size_bytes()),
                                 model.size_bytes(), model.path(),
                                 model.loaded() ? "  (loaded)" : "");
    if (!model.unusable_reason().empty()) {
      std::cout << "    cannot serve: " << model.unusable_reason() << "\n";
    }
  }
  return 0;
}

// Loaded models: RAM used of the budget, sessions, running and queued
// requests, what they do now.
int Ps(WasteClient& client, bool json) {
  auto stats = client.GetStats(v1::GetStatsRequest());
  if (!stats.ok()) return FailCall(client, stats.status());
  v1::GetStatsResponse loaded;
  for (const v1::ModelStats& m : stats->models()) {
    v1::ModelStats* row = loaded.add_models();
    row->set_model(m.model());
    row->set_ram_used_bytes(m.ram_used_bytes());
    row->set_ram_budget_bytes(m.ram_budget_bytes());
    row->set_sessions(m.sessions());
    row->set_session_capacity(m.session_capacity());
    row->set_running_requests(m.running_requests());
    row->set_queued_requests(m.queued_requests());
    row->set_max_concurrent_requests(m.max_concurrent_requests());
    row->set_last_decode_tokens_per_second(m.last_decode_tokens_per_second());
  }
  if (json) return PrintJson(loaded);
  if (loaded.models().empty()) {
    std::cout << "no model is loaded\n";
    return 0;
  }
  size_t width = 5;
  for (const v1::ModelStats& m : loaded.models()) width = std::max(width, m.model().size());
  std::cout << absl::StrFormat("%-*s  %10s  %10s  %8s  %7s  %6s  %10s\n", width, "MODEL", "RAM",
                               "BUDGET", "SESSIONS", "RUNNING", "QUEUED", "LAST TOK/S");
  for (const v1::ModelStats& m : loaded.models()) {
    std::cout << absl::StrFormat(
        "%-*s  %10s  %10s  %4d/%-3d  %3d/%-3d  %6d  %10.2f\n", width, m.model(),
        FormatBytes(m.ram_used_bytes()), FormatBytes(m.ram_budget_bytes()), m.sessions(),
        m.session_capacity(), m.running_requests(), m.max_concurrent_requests(),
        m.queued_requests(), m.last_decode_tokens_per_second());
  }
  return 0;
}

int Stats(WasteClient& client, bool json) {
  auto stats = client.GetStats(v1::GetStatsRequest());
  if (!stats.ok()) return FailCall(client, stats.status());
  if (json) return PrintJson(*stats);
  std::cout << absl::StrFormat("version %s, up %.0f s, %d active, %d queued\n", stats->version(),
                               stats->uptime_seconds(), stats->active_requests(),
                               stats->queued_requests());
  for (const v1::ModelStats& m : stats->models()) {
    const v1::EngineStats& t = m.totals();
    const int64_t acquires = t.cache_hits() + t.cache_misses();
    std::cout << absl::StrFormat(
        "%s: %d requests (%d failed), %d sessions, %d tokens, last decode %.2f tok/s\n"
        "  RAM %s of %s; weights read %s, hit rate %.1f%%, io wait %.0f ms, compute %.0f ms\n",
        m.model(), m.requests(), m.failed_requests(), m.sessions(), t.tokens(),
        m.last_decode_tokens_per_second(), FormatBytes(m.ram_used_bytes()),
        FormatBytes(m.ram_budget_bytes()), FormatBytes(t.bytes_read()),
        acquires > 0 ? 100.0 * t.cache_hits() / acquires : 100.0, t.io_wait_ms(), t.compute_ms());
    std::cout << absl::StrFormat(
        "  batch: %d running, %d queued (max %d together, %d queued, KV caches for %d); %d "
        "steps, %.2f sessions per step (max %d), queue wait %.1f ms on average\n"
        "  last step: %d sessions, %d tokens, %s read, %.1f ms\n",
        m.running_requests(), m.queued_requests(), m.max_concurrent_requests(),
        m.max_queued_requests(), m.session_capacity(), m.steps(), m.mean_batch_size(),
        m.max_batch_size(), m.mean_queue_ms(), m.last_step_batch_size(), m.last_step_tokens(),
        FormatBytes(m.last_step_bytes_read()), m.last_step_ms());
  }
  return 0;
}

int Tokenize(WasteClient& client, const std::vector<std::string>& raw) {
  auto args = ParseArgs(raw, {{"model"}, {"special", false}});
  if (!args.ok() || args->positional().size() != 1) {
    std::cerr << "usage: waste-client tokenize [--model NAME] [--special] TEXT\n";
    return 2;
  }
  v1::TokenizeRequest request;
  request.set_model(args->GetOr("model", ""));
  request.set_text(args->positional()[0]);
  request.set_add_special(args->Has("special"));
  request.set_parse_special(args->Has("special"));
  auto response = client.Tokenize(request);
  if (!response.ok()) return FailCall(client, response.status());
  for (int i = 0; i < response->ids_size(); ++i) {
    std::cout << response->ids(i) << "\t" << response->pieces(i) << "\n";
  }
  return 0;
}

int Plan(WasteClient& client, const std::vector<std::string>& raw) {
  auto args = ParseArgs(
      raw, {{"model"}, {"ram-budget"}, {"vram-budget"}, {"ctx"}, {"sessions"}, {"json", false}});
  if (!args.ok() || !args->positional().empty()) {
    std::cerr << "usage: waste-client plan [--model NAME] [--ram-budget SIZE] "
                 "[--vram-budget SIZE] [--ctx N] [--sessions N]\n";
    return 2;
  }
  v1::PlanRequest request;
  request.set_model(args->GetOr("model", ""));
  if (auto budget = args->Get("ram-budget")) {
    auto bytes = ParseByteSize(*budget);
    if (!bytes.ok()) {
      std::cerr << "waste-client: --ram-budget: " << bytes.status().message() << "\n";
      return 2;
    }
    request.set_ram_budget_bytes(*bytes);
  }
  if (auto budget = args->Get("vram-budget")) {
    auto bytes = ParseByteSize(*budget);
    if (!bytes.ok()) {
      std::cerr << "waste-client: --vram-budget: " << bytes.status().message() << "\n";
      return 2;
    }
    request.set_vram_budget_bytes(*bytes);
  }
  auto ctx = args->GetInt("ctx", 0);
  if (!ctx.ok()) {
    std::cerr << "waste-client: " << ctx.status().message() << "\n";
    return 2;
  }
  if (*ctx > 0) request.set_context_length(static_cast<int32_t>(*ctx));
  auto sessions = args->GetInt("sessions", 0);
  if (!sessions.ok() || *sessions < 0) {
    std::cerr << "waste-client: --sessions must be a positive number\n";
    return 2;
  }
  if (*sessions > 0) request.set_max_concurrent_requests(static_cast<int32_t>(*sessions));
  auto response = client.Plan(request);
  if (!response.ok()) return FailCall(client, response.status());
  const v1::MemoryPlan& plan = response->plan();
  if (args->Has("json")) {
    const int code = PrintJson(*response);
    return code != 0 ? code : (plan.fits() ? 0 : 1);
  }
  std::cout << absl::StrFormat(
      "budget       %s%s\nfloor        %s\nrecommended  %s\nweights      %s (pinned %s, "
      "streaming pool %s)\nKV cache     %s per session\nsessions     %d together (%d fit this "
      "budget)\nscratch      %s (steps of up to %d tokens)\nread/token   %s\nusable RAM   %s "
      "(%s)\n",
      FormatBytes(plan.ram_budget_bytes()), plan.fits() ? "" : "  (UNDER THE FLOOR)",
      FormatBytes(plan.floor_bytes()), FormatBytes(plan.recommended_bytes()),
      FormatBytes(plan.model_bytes()), FormatBytes(plan.pinned_bytes()),
      FormatBytes(plan.pool_bytes()), FormatBytes(plan.session_bytes()), plan.concurrent_sessions(),
      plan.max_sessions(), FormatBytes(plan.scratch_bytes()), plan.step_tokens(),
      FormatBytes(plan.bytes_read_per_token()), FormatBytes(plan.usable_ram_bytes()),
      plan.usable_ram_source());
  if (plan.vram_budget_bytes() > 0) {
    const v1::TierBytes& resident = plan.resident_bytes();
    const v1::TierBytes& token = plan.bytes_per_token();
    std::cout << absl::StrFormat(
        "VRAM         %s: weights %s in %d of %d chunks, activations %s\n"
        "resident     VRAM %s, RAM %s, disk only %s\n"
        "per token    VRAM %s, RAM %s, disk %s\n",
        FormatBytes(plan.vram_budget_bytes()), FormatBytes(plan.vram_weight_bytes()),
        plan.vram_chunks(), plan.vram_eligible_chunks(), FormatBytes(plan.vram_scratch_bytes()),
        FormatBytes(resident.vram()), FormatBytes(resident.ram()), FormatBytes(resident.disk()),
        FormatBytes(token.vram()), FormatBytes(token.ram()), FormatBytes(token.disk()));
  }
  for (const v1::PlanPart& part : plan.parts()) {
    std::cout << absl::StrFormat("  %-12s %10s, %10s resident", part.part(),
                                 FormatBytes(part.bytes()), FormatBytes(part.resident_bytes()));
    if (plan.vram_budget_bytes() > 0) {
      std::cout << absl::StrFormat(" (%s in VRAM)", FormatBytes(part.vram_bytes()));
    }
    std::cout << "\n";
  }
  std::cout << plan.explanation() << "\n";
  return plan.fits() ? 0 : 1;
}

int LoadUnload(WasteClient& client, const std::vector<std::string>& raw, bool load) {
  auto args = ParseArgs(raw, {{"force", false}});
  if (!args.ok() || args->positional().size() != 1 || (load && args->Has("force"))) {
    std::cerr << "usage: waste-client load MODEL | unload [--force] MODEL\n";
    return 2;
  }
  const std::string model = args->positional()[0];
  if (load) {
    v1::LoadModelRequest request;
    request.set_model(model);
    auto response = client.LoadModel(request);
    if (!response.ok()) return FailCall(client, response.status());
    std::cout << "loaded " << response->model().name() << " in " << response->load_ms() << " ms\n";
    return 0;
  }
  v1::UnloadModelRequest request;
  request.set_model(model);
  request.set_force(args->Has("force"));
  auto response = client.UnloadModel(request);
  if (!response.ok()) return FailCall(client, response.status());
  std::cout << "unloaded " << model << "\n";
  return 0;
}

int Main(int argc, char** argv) {
  std::vector<std::string> raw(argv + 1, argv + argc);
  // Global flags come before the command.
  size_t command_index = 0;
  while (command_index < raw.size() && raw[command_index].rfind("--", 0) == 0) {
    bool has_inline_value = raw[command_index].find('=') != std::string::npos;
    bool takes_value = raw[command_index] != "--help" && !has_inline_value;
    command_index += takes_value ? 2 : 1;
  }
  std::vector<std::string> global(raw.begin(), raw.begin() + std::min(command_index, raw.size()));
  auto flags = ParseArgs(global, {{"socket"}, {"address"}, {"api-key"}, {"help", false}});
  if (!flags.ok()) {
    std::cerr << "waste-client: " << flags.status().message() << "\n\n" << kUsage;
    return 2;
  }
  if (flags->Has("help") || command_index >= raw.size()) {
    (flags->Has("help") ? std::cout : std::cerr) << kUsage;
    return flags->Has("help") ? 0 : 2;
  }
  std::string command = raw[command_index];
  std::string socket = flags->GetOr("socket", "");
  if (socket.size() > kMaxSocketPath) {
    std::cerr << "waste-client: socket path " << socket << " is longer than " << kMaxSocketPath
              << " bytes, the limit for Unix sockets\n";
    return 2;
  }
  // The API key a daemon wants over TCP: --api-key, else $WASTE_API_KEY.
  std::string api_key = flags->GetOr("api-key", "");
  if (api_key.empty() && getenv("WASTE_API_KEY") != nullptr) api_key = getenv("WASTE_API_KEY");
  std::unique_ptr<WasteClient> client =
      WasteClient::Connect(ResolveTarget(socket, flags->GetOr("address", "")), api_key);
  if (command == "health") return Health(*client);
  std::vector<std::string> rest(raw.begin() + command_index + 1, raw.end());
  if (command == "models" || command == "stats" || command == "ps") {
    absl::StatusOr<bool> json = JsonFlag(rest, command);
    if (!json.ok()) {
      std::cerr << json.status().message() << "\n";
      return 2;
    }
    if (command == "models") return Models(*client, *json);
    if (command == "ps") return Ps(*client, *json);
    return Stats(*client, *json);
  }
  if (command == "run") return RunChat(*client, rest);
  if (command == "generate") return RunGenerate(*client, rest, /*chat=*/false);
  if (command == "chat") return RunGenerate(*client, rest, /*chat=*/true);
  if (command == "tokenize") return Tokenize(*client, rest);
  if (command == "plan") return Plan(*client, rest);
  if (command == "load" || command == "unload") return LoadUnload(*client, rest, command == "load");
  if (command == "save-session") return SaveSession(*client, rest);
  std::cerr << "waste-client: unknown command '" << command << "'\n\n" << kUsage;
  return 2;
}

}  // namespace
}  // namespace waste

int main(int argc, char** argv) { return waste::Main(argc, argv); }
