#include "client/generate_command.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "absl/strings/str_format.h"
#include "client/reply_printer.h"
#include "common/cli_args.h"
#include "common/format.h"

namespace waste {
namespace {

constexpr char kGenerateUsage[] = R"(usage: waste-client generate [flags] PROMPT
       waste-client chat [flags] MESSAGE

Streams the model's continuation of PROMPT (an empty PROMPT starts from BOS)
to stdout as tokens arrive. `chat` sends MESSAGE as a user message through
the model's chat template.

flags:
  --model NAME          model to use (default: the daemon's default or only one)
  --max-tokens N        stop after N tokens (default: until end of text)
  --temperature T       0 = greedy (default 0)
  --top-k K --top-p P --min-p P
  --repeat-penalty R --presence-penalty P --frequency-penalty F
  --seed S              same seed + request = same tokens
  --stop TEXT           stop when TEXT appears (repeatable)
  --system TEXT         (chat) a system message first
  --think, --no-think   (chat) a hybrid model reasons first, or not (Qwen3 and
                        GLM-4.5 do by default, DeepSeek-V3.1 does not)
  --reasoning-effort E  (chat) gpt-oss: low, medium (default) or high
  --session ID          continue a session (its id is printed with --stats)
  --keep-session        keep the session on disk when the model unloads or the
                        daemon stops, so --session ID continues it later
  --stats               print tok/s, time to first token and engine counters to stderr
  --token-stats         also print per-token engine counters to stderr
)";

}  // namespace

void FillReasoning(const ParsedArgs& args, v1::ChatMessages* chat) {
  if (args.Has("think")) chat->set_thinking(true);
  if (args.Has("no-think")) chat->set_thinking(false);
  chat->set_reasoning_effort(args.GetOr("reasoning-effort", ""));
}

namespace {

absl::Status FillSampling(const ParsedArgs& args, v1::SamplingParams* sampling) {
  struct FloatFlag {
    const char* name;
    void (v1::SamplingParams::*set)(float);
  };
  static const FloatFlag kFloats[] = {
      {"temperature", &v1::SamplingParams::set_temperature},
      {"top-p", &v1::SamplingParams::set_top_p},
      {"min-p", &v1::SamplingParams::set_min_p},
      {"repeat-penalty", &v1::SamplingParams::set_repetition_penalty},
      {"presence-penalty", &v1::SamplingParams::set_presence_penalty},
      {"frequency-penalty", &v1::SamplingParams::set_frequency_penalty},
  };
  for (const FloatFlag& flag : kFloats) {
    if (!args.Has(flag.name)) continue;
    absl::StatusOr<double> value = args.GetDouble(flag.name, 0);
    if (!value.ok()) return value.status();
    (sampling->*flag.set)(static_cast<float>(*value));
  }
  if (args.Has("top-k")) {
    absl::StatusOr<int64_t> k = args.GetInt("top-k", 0);
    if (!k.ok()) return k.status();
    sampling->set_top_k(static_cast<int32_t>(*k));
  }
  if (args.Has("seed")) {
    absl::StatusOr<int64_t> seed = args.GetInt("seed", 0);
    if (!seed.ok()) return seed.status();
    sampling->set_seed(static_cast<uint64_t>(*seed));
  }
  return absl::OkStatus();
}

void PrintStats(const v1::EngineStats& s, const char* label) {
  std::cerr << absl::StrFormat(
      "%s: %d hits, %d misses, %s read (%.2f GB/s), io wait %.1f ms, compute %.1f ms, pool %s "
      "of %s\n",
      label, s.cache_hits(), s.cache_misses(), FormatBytes(s.bytes_read()), s.read_gbps(),
      s.io_wait_ms(), s.compute_ms(), FormatBytes(s.pool_used_bytes()),
      FormatBytes(s.pool_capacity_bytes()));
}

}  // namespace

int FailCall(const WasteClient& client, const absl::Status& status) {
  std::cerr << "waste-client: " << status.message();
  if (status.code() == absl::StatusCode::kUnavailable) {
    std::cerr << "; " << StartDaemonHint(client.target());
  }
  std::cerr << "\n";
  return 1;
}

int RunGenerate(WasteClient& client, const std::vector<std::string>& raw, bool chat) {
  auto args = ParseArgs(raw, {{"model"},
                              {"max-tokens"},
                              {"temperature"},
                              {"top-k"},
                              {"top-p"},
                              {"min-p"},
                              {"repeat-penalty"},
                              {"presence-penalty"},
                              {"frequency-penalty"},
                              {"seed"},
                              {"stop"},
                              {"system"},
                              {"think", false},
                              {"no-think", false},
                              {"reasoning-effort"},
                              {"session"},
                              {"keep-session", false},
                              {"stats", false},
                              {"token-stats", false},
                              {"help", false}});
  if (!args.ok()) {
    std::cerr << "waste-client: " << args.status().message() << "\n\n" << kGenerateUsage;
    return 2;
  }
  if (args->Has("help")) {
    std::cout << kGenerateUsage;
    return 0;
  }
  if (args->positional().size() > 1) {
    std::cerr << "waste-client: give the prompt as one argument (quote it)\n";
    return 2;
  }
  std::string prompt = args->positional().empty() ? "" : args->positional()[0];
  v1::GenerateRequest request;
  request.set_model(args->GetOr("model", ""));
  if (chat) {
    if (auto system = args->Get("system")) {
      v1::ChatMessage* m = request.mutable_chat()->add_messages();
      m->set_role("system");
      m->set_content(*system);
    }
    v1::ChatMessage* m = request.mutable_chat()->add_messages();
    m->set_role("user");
    m->set_content(prompt);
    FillReasoning(*args, request.mutable_chat());
  } else {
    request.set_prompt(prompt);
  }
  absl::StatusOr<int64_t> max_tokens = args->GetInt("max-tokens", 0);
  if (!max_tokens.ok()) {
    std::cerr << "waste-client: " << max_tokens.status().message() << "\n";
    return 2;
  }
  if (*max_tokens > 0) request.set_max_tokens(static_cast<int32_t>(*max_tokens));
  if (absl::Status status = FillSampling(*args, request.mutable_sampling()); !status.ok()) {
    std::cerr << "waste-client: " << status.message() << "\n";
    return 2;
  }
  for (const std::string& stop : args->GetAll("stop")) request.add_stop(stop);
  request.set_session_id(args->GetOr("session", ""));
  request.set_keep_session(args->Has("keep-session"));
  const bool stats = args->Has("stats") || args->Has("token-stats");
  request.set_stream_stats(args->Has("token-stats"));

  v1::GenerateDone done;
  std::string session;
  // A chat reply's reasoning (harmony, <think>) shown apart.
  ReplyPrinter chat_reply(std::cout, isatty(STDOUT_FILENO) != 0);
  absl::Status status = client.Generate(request, [&](const v1::GenerateEvent& event) {
    if (event.has_token() && chat) {
      chat_reply.Add(event.token().text());
    } else if (event.has_token()) {
      std::cout << event.token().text() << std::flush;
    } else if (event.has_started()) {
      session = event.started().session_id();
      chat_reply.Start(event.started().reasoning_open());
    } else if (event.has_stats()) {
      PrintStats(event.stats(), "token");
    } else if (event.has_done()) {
      done = event.done();
    }
    return true;
  });
  if (chat) chat_reply.Finish();
  std::cout << "\n";
  if (!status.ok()) return FailCall(client, status);
  if (stats) {
    const v1::Timings& t = done.timings();
    std::cerr << absl::StrFormat(
        "session %s: %d prompt tokens (%d cached), %d generated (%s); time to first token %.1f "
        "ms (queued %.1f ms); prefill %.1f tok/s; decode %.2f tok/s; %d steps with %.2f "
        "sessions on average\n",
        session, done.usage().prompt_tokens(), done.usage().cached_prompt_tokens(),
        done.usage().completion_tokens(), v1::FinishReason_Name(done.finish_reason()),
        t.time_to_first_token_ms(), t.queue_ms(), t.prefill_tokens_per_second(),
        t.decode_tokens_per_second(), done.steps(), done.mean_batch_size());
    PrintStats(done.stats(), "engine");
  }
  return 0;
}

}  // namespace waste
