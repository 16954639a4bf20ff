// waste-client: the command-line client of the waste daemon.
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "client/cli_args.h"
#include "client/format.h"
#include "client/waste_client.h"

namespace waste {
namespace {

constexpr char kUsage[] =
    R"(usage: waste-client [--socket PATH | --address HOST:PORT] <command> [args]

commands:
  health     is the daemon serving? (prints SERVING)
  models     the models the daemon can serve
  stats      daemon statistics

The daemon is found at --socket, else --address, else $WASTE_ADDRESS, else
$XDG_RUNTIME_DIR/waste/wasted.sock (/run/waste/wasted.sock without it).
)";

constexpr size_t kMaxSocketPath = 107;  // sizeof(sockaddr_un::sun_path) - 1

// Prints a failed call as one line, with how to start a daemon when none
// answered. Returns the exit code.
int Fail(const WasteClient& client, const absl::Status& status) {
  std::cerr << "waste-client: " << status.message();
  if (status.code() == absl::StatusCode::kUnavailable) {
    std::cerr << "; " << StartDaemonHint(client.target());
  }
  std::cerr << "\n";
  return 1;
}

int Health(WasteClient& client) {
  auto status = client.Health();
  if (!status.ok()) return Fail(client, status.status());
  std::cout << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(*status) << "\n";
  return *status == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

int Models(WasteClient& client) {
  auto models = client.ListModels();
  if (!models.ok()) return Fail(client, models.status());
  if (models->models().empty()) {
    std::cout << "no models (the daemon serves *.gguf files under its --models-dir)\n";
    return 0;
  }
  size_t width = 4;
  for (const v1::ModelInfo& model : models->models()) width = std::max(width, model.name().size());
  std::cout << absl::StrFormat("%-*s  %10s  %14s  %s\n", width, "NAME", "SIZE", "BYTES", "PATH");
  for (const v1::ModelInfo& model : models->models()) {
    std::cout << absl::StrFormat("%-*s  %10s  %14d  %s\n", width, model.name(),
                                 FormatBytes(model.size_bytes()), model.size_bytes(), model.path());
  }
  return 0;
}

int Stats(WasteClient& client) {
  auto stats = client.GetStats(v1::GetStatsRequest());
  if (!stats.ok()) return Fail(client, stats.status());
  std::cout << absl::StrFormat("version %s, up %.0f s, %d active, %d queued\n", stats->version(),
                               stats->uptime_seconds(), stats->active_requests(),
                               stats->queued_requests());
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
  auto flags = ParseArgs(global, {{"socket"}, {"address"}, {"help", false}});
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
  std::unique_ptr<WasteClient> client =
      WasteClient::Connect(ResolveTarget(socket, flags->GetOr("address", "")));
  if (command == "health") return Health(*client);
  if (command == "models") return Models(*client);
  if (command == "stats") return Stats(*client);
  std::cerr << "waste-client: unknown command '" << command << "'\n\n" << kUsage;
  return 2;
}

}  // namespace
}  // namespace waste

int main(int argc, char** argv) { return waste::Main(argc, argv); }
