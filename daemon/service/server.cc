#include "daemon/service/server.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace waste {
namespace {

// True when something accepts connections on the Unix socket at `path`.
bool SocketAnswers(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  bool answers = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return answers;
}

absl::Status PrepareSocketPath(const std::string& path) {
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path ", path, " is longer than ",
                                                   sizeof(sockaddr_un::sun_path) - 1,
                                                   " bytes, the limit for Unix sockets"));
  }
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    const bool existed = std::filesystem::exists(dir, ec);
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create socket directory ", dir.string(), ": ", ec.message()));
    }
    struct stat dir_st;
    if (!existed) {
      // Ours: the owner and its group (the unit's `waste` group) only.
      chmod(dir.c_str(), 0750);
    } else if (stat(dir.c_str(), &dir_st) == 0 && (dir_st.st_mode & S_IWOTH) &&
               !(dir_st.st_mode & S_ISVTX)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "socket directory ", dir.string(),
          " is writable by everyone without the sticky bit, so anyone could replace the socket; "
          "use a private directory (e.g. $XDG_RUNTIME_DIR/waste)"));
    }
    if (access(dir.c_str(), W_OK | X_OK) != 0) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create socket in ", dir.string(), ": ", strerror(errno)));
    }
  }
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::AlreadyExistsError(
          absl::StrCat(path, " exists and is not a socket; refusing to replace it"));
    }
    if (SocketAnswers(path)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "socket ", path, " is in use by another process (is wasted already running?)"));
    }
    WLOG(INFO) << "removing stale socket " << path;
    if (unlink(path.c_str()) != 0) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot remove stale socket ", path, ": ", strerror(errno)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options,
                                                      const std::vector<grpc::Service*>& services) {
  if (absl::Status status = PrepareSocketPath(options.socket_path); !status.ok()) return status;

  grpc::EnableDefaultHealthCheckService(true);
  if (options.listen.empty() || !options.tcp_requires_key) {
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + options.socket_path, grpc::InsecureServerCredentials());
  int tcp_port = 0;
  if (!options.listen.empty()) {
    builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &tcp_port);
  }
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on unix:", options.socket_path,
                     options.listen.empty() ? "" : absl::StrCat(" and ", options.listen),
                     " (address in use or not permitted; gRPC logged the details above)"));
  }
  if (!options.listen.empty() && tcp_port == 0) {
    server->Shutdown();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen));
  }
  if (chmod(options.socket_path.c_str(), 0660) != 0) {
    WLOG(WARNING) << "cannot set mode 0660 on " << options.socket_path << ": " << strerror(errno);
  }
  return std::unique_ptr<Server>(new Server(options, std::move(server), tcp_port));
}

Server::Server(ServerOptions options, std::unique_ptr<grpc::Server> server, int tcp_port)
    : options_(std::move(options)), server_(std::move(server)), tcp_port_(tcp_port) {}

Server::~Server() {
  if (!shut_down_) Shutdown(absl::ZeroDuration());
  server_->Wait();
}

void Server::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  if (auto* health = server_->GetHealthCheckService()) health->SetServingStatus(false);
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  unlink(options_.socket_path.c_str());
}

void Server::Wait() { server_->Wait(); }

}  // namespace waste
