#include "client/run_command.h"

#include <unistd.h>

#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "client/generate_command.h"
#include "client/reply_printer.h"
#include "common/cli_args.h"

namespace waste {
namespace {

constexpr char kRunUsage[] =
    R"(usage: waste-client run [--system TEXT] [--max-tokens N] [--think | --no-think]
                        [--reasoning-effort low|medium|high] MODEL

An interactive chat with MODEL: type a message and press enter; the answer
streams back. The conversation lives in one daemon session, so each turn
only computes its new tokens. Commands: /bye ends, /clear forgets the
conversation, /nothink and /think switch a hybrid model's reasoning (Qwen3,
GLM-4.5, DeepSeek-V3.1) off and on for the turns that follow. Works over a pipe: one
message per line.
)";

}  // namespace

int RunChatLoop(WasteClient& client, const std::string& model, const ChatLoopOptions& options,
                std::istream& in, std::ostream& out, std::ostream& err, bool interactive) {
  const std::string& system = options.system;
  v1::ChatMessages controls = options.controls;  // /think, /nothink change it.
  std::vector<v1::ChatMessage> history;
  auto reset = [&] {
    history.clear();
    if (!system.empty()) {
      v1::ChatMessage m;
      m.set_role("system");
      m.set_content(system);
      history.push_back(m);
    }
  };
  reset();
  std::string session;
  std::string line;
  while (true) {
    if (interactive) out << ">>> " << std::flush;
    if (!std::getline(in, line)) break;
    const std::string message(absl::StripAsciiWhitespace(line));
    if (message.empty()) continue;
    if (message == "/bye" || message == "/exit") break;
    if (message == "/clear") {
      reset();
      session.clear();
      if (interactive) out << "(new conversation)\n";
      continue;
    }
    if (message == "/think" || message == "/nothink") {
      controls.set_thinking(message == "/think");
      if (interactive) out << (message == "/think" ? "(reasoning on)\n" : "(reasoning off)\n");
      continue;
    }
    if (message[0] == '/') {
      err << "unknown command " << message
          << " (/bye ends, /clear forgets the conversation, /think and /nothink switch "
             "reasoning)\n";
      continue;
    }
    v1::GenerateRequest request;
    request.set_model(model);
    request.set_session_id(session);
    if (options.max_tokens > 0) request.set_max_tokens(options.max_tokens);
    v1::ChatMessage user;
    user.set_role("user");
    user.set_content(message);
    history.push_back(user);
    *request.mutable_chat() = controls;
    for (const v1::ChatMessage& m : history) *request.mutable_chat()->add_messages() = m;
    // A reply's reasoning shown apart; the history keeps the answer only.
    ReplyPrinter reply(out, interactive && isatty(STDOUT_FILENO) != 0);
    absl::Status status = client.Generate(request, [&](const v1::GenerateEvent& event) {
      if (event.has_started()) {
        session = event.started().session_id();
        reply.Start(event.started().reasoning_open());
      }
      if (event.has_token()) reply.Add(event.token().text());
      return true;
    });
    reply.Finish();
    out << "\n";
    if (!status.ok()) {
      history.pop_back();
      // A session the daemon evicted is not fatal: start over.
      if (status.code() == absl::StatusCode::kNotFound && !session.empty()) {
        err << "(the daemon dropped this conversation's session; starting a new one)\n";
        session.clear();
        continue;
      }
      return FailCall(client, status);
    }
    v1::ChatMessage assistant;
    assistant.set_role("assistant");
    assistant.set_content(reply.answer());
    history.push_back(assistant);
  }
  return 0;
}

int RunChat(WasteClient& client, const std::vector<std::string>& raw) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(
      raw,
      {{"system"}, {"max-tokens"}, {"no-think", false}, {"reasoning-effort"}, {"help", false}});
  if (!args.ok() || (!args->Has("help") && args->positional().size() != 1)) {
    std::cerr << (args.ok() ? "" : "waste-client: " + std::string(args.status().message()) + "\n\n")
              << kRunUsage;
    return 2;
  }
  if (args->Has("help")) {
    std::cout << kRunUsage;
    return 0;
  }
  absl::StatusOr<int64_t> max_tokens = args->GetInt("max-tokens", 0);
  if (!max_tokens.ok() || *max_tokens < 0) {
    std::cerr << "waste-client: --max-tokens must be a number >= 0\n";
    return 2;
  }
  ChatLoopOptions options{.system = args->GetOr("system", ""),
                          .max_tokens = static_cast<int>(*max_tokens)};
  FillReasoning(*args, &options.controls);
  return RunChatLoop(client, args->positional()[0], options, std::cin, std::cout, std::cerr,
                     isatty(STDIN_FILENO) != 0);
}

}  // namespace waste
