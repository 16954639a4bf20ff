#include "tests/soak/soak.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "client/waste_client.h"
#include "nlohmann/json.hpp"
#include "tests/daemon_harness.h"
#include "tests/testdata.h"

namespace waste::soak {
namespace {

constexpr char kModel[] = "stories260K";
constexpr int kContext = 512;
constexpr int kSessions = 4;
// The plan's runtime reserve (daemon/memory/plan.h PlanOptions), which the
// floor and so the budget include.
constexpr int64_t kRuntimeReserve = int64_t{64} << 20;
constexpr int kMaxErrorSamples = 20;

// kB fields of /proc/PID/status, in bytes (-1 when unreadable).
int64_t ProcStatusBytes(pid_t pid, absl::string_view field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, field) || line.size() <= field.size() ||
        line[field.size()] != ':') {
      continue;
    }
    std::vector<absl::string_view> parts =
        absl::StrSplit(absl::string_view(line).substr(field.size() + 1), absl::ByAnyChar(" \t"),
                       absl::SkipEmpty());
    int64_t kb = 0;
    if (!parts.empty() && absl::SimpleAtoi(parts[0], &kb)) return kb * 1024;
  }
  return -1;
}

struct RssSample {
  absl::Duration at;  // Since the measured part began (negative: warm-up).
  int64_t bytes;      // VmRSS.
  int64_t anon;       // RssAnon: the daemon's private memory.
};

// What the clients share: counts, the references of checked outputs.
class Shared {
 public:
  explicit Shared(bool faults) : faults_(faults) {}

  enum class Outcome { kOk, kExpected, kInjected, kUnexpected };

  // Classifies a finished RPC: OK; an error the op allows (`allowed`); an
  // injected read failure (fault storm only); or unexpected.
  Outcome Record(const std::string& op, const absl::Status& status,
                 std::initializer_list<absl::StatusCode> allowed = {}) {
    Outcome outcome = Outcome::kUnexpected;
    if (status.ok()) {
      outcome = Outcome::kOk;
    } else if (std::find(allowed.begin(), allowed.end(), status.code()) != allowed.end()) {
      outcome = Outcome::kExpected;
    } else if (faults_ && status.code() == absl::StatusCode::kUnavailable &&
               absl::StrContains(status.message(), "injected")) {
      outcome = Outcome::kInjected;
    }
    absl::MutexLock lock(&mu_);
    ++report_.requests;
    OpCounts& counts = report_.ops[op];
    switch (outcome) {
      case Outcome::kOk:
        ++counts.ok;
        break;
      case Outcome::kExpected:
        ++counts.expected_errors;
        break;
      case Outcome::kInjected:
        ++counts.injected_failures;
        ++report_.injected_failures;
        break;
      case Outcome::kUnexpected:
        ++counts.unexpected_errors;
        ++report_.unexpected_errors;
        AddSampleLocked(absl::StrCat(op, ": ", status.ToString()));
        break;
    }
    return outcome;
  }

  // A wrong answer from an RPC that succeeded.
  void Wrong(const std::string& op, const std::string& what) {
    absl::MutexLock lock(&mu_);
    ++report_.ops[op].unexpected_errors;
    ++report_.unexpected_errors;
    AddSampleLocked(absl::StrCat(op, ": ", what));
  }

  void Golden(bool matched) {
    absl::MutexLock lock(&mu_);
    ++report_.golden_checked;
    if (!matched) ++report_.golden_mismatches;
  }

  void AfterFailure(bool correct) {
    absl::MutexLock lock(&mu_);
    ++report_.checks_after_failure;
    if (correct) ++report_.correct_after_failure;
  }

  // The first answer for `key` becomes the reference; later ones must
  // equal it. Returns whether `value` matches.
  bool SameAsFirst(const std::string& key, const std::string& value) {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = references_.emplace(key, value);
    return inserted || it->second == value;
  }

  int64_t requests() {
    absl::MutexLock lock(&mu_);
    return report_.requests;
  }

  SoakReport Take() {
    absl::MutexLock lock(&mu_);
    return report_;
  }

 private:
  void AddSampleLocked(std::string sample) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (report_.error_samples.size() < kMaxErrorSamples) {
      report_.error_samples.push_back(std::move(sample));
    }
  }

  const bool faults_;
  absl::Mutex mu_;
  SoakReport report_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> references_ ABSL_GUARDED_BY(mu_);
};

struct Generated {
  absl::Status status;
  std::string session_id;
  std::vector<int32_t> ids;
  std::string text;
  bool done = false;
};

Generated RunGenerate(WasteClient& client, const v1::GenerateRequest& request,
                      int cancel_after = -1) {
  Generated g;
  int tokens = 0;
  g.status = client.Generate(request, [&](const v1::GenerateEvent& event) {
    if (event.has_started()) g.session_id = event.started().session_id();
    if (event.has_token() && event.token().id() >= 0) {
      g.ids.push_back(event.token().id());
      g.text += event.token().text();
      if (++tokens == cancel_after) return false;
    }
    if (event.has_done()) g.done = true;
    return true;
  });
  return g;
}

std::string Ids(const std::vector<int32_t>& ids) { return absl::StrJoin(ids, ","); }

// One client: a loop of weighted random operations.
class Client {
 public:
  Client(int index, const std::string& target, Shared* shared, uint64_t seed,
         std::vector<std::string> only)
      : index_(index),
        client_(WasteClient::Connect(target)),
        shared_(shared),
        rng_(seed * 7919 + index),
        only_(std::move(only)) {}

  void RunOne() {
    // After an injected failure the next request is a checked one.
    if (check_next_) {
      check_next_ = false;
      Golden(/*after_failure=*/true);
      return;
    }
    int pick = 0;
    do {
      pick = static_cast<int>(rng_() % 100);
    } while (!only_.empty() && std::find(only_.begin(), only_.end(), OpOf(pick)) == only_.end());
    if (pick < 22) {
      Golden(false);
    } else if (pick < 36) {
      Sampled();
    } else if (pick < 46) {
      Chat();
    } else if (pick < 56) {
      Cancel();
    } else if (pick < 66) {
      Tokenize();
    } else if (pick < 80) {
      Session();
    } else if (pick < 86) {
      List();
    } else if (pick < 91) {
      Stats();
    } else if (pick < 94) {
      Plan();
    } else if (pick < 98) {
      Load();
    } else {
      Unload();
    }
  }

 private:
  using Outcome = Shared::Outcome;

  // The first operation RunOne runs for `pick`, by the report's names.
  static std::string OpOf(int pick) {
    static const std::pair<int, const char*> kOps[] = {{22, "generate_golden"},
                                                       {36, "generate_sampled"},
                                                       {46, "chat"},
                                                       {56, "generate_cancelled"},
                                                       {66, "tokenize"},
                                                       {80, "session_start"},
                                                       {86, "list_models"},
                                                       {91, "stats"},
                                                       {94, "plan"},
                                                       {98, "load"},
                                                       {100, "unload"}};
    for (const auto& [below, name] : kOps) {
      if (pick < below) return name;
    }
    return "";
  }

  void Note(Outcome outcome) {
    if (outcome == Outcome::kInjected) check_next_ = true;
  }

  // Greedy from BOS: the golden tokens (a prefix of them).
  void Golden(bool after_failure) {
    static const std::vector<int32_t>& golden =
        *new std::vector<int32_t>(testing::StoriesGoldenIds());
    const int n = after_failure ? 64 : 16 + static_cast<int>(rng_() % 241);
    v1::GenerateRequest request;
    request.set_model(kModel);
    request.set_max_tokens(n);
    request.set_stop_at_eos(false);
    request.mutable_sampling()->set_temperature(0);
    Generated g = RunGenerate(*client_, request);
    const Outcome outcome = shared_->Record("generate_golden", g.status);
    bool matched = false;
    if (outcome == Outcome::kOk) {
      matched = g.done && g.ids == std::vector<int32_t>(golden.begin(), golden.begin() + n);
      shared_->Golden(matched);
      if (!matched) {
        shared_->Wrong("generate_golden",
                       absl::StrCat("greedy from BOS gave ", g.ids.size(), " tokens [", Ids(g.ids),
                                    "], not the first ", n, " golden ones"));
      }
    }
    // Correct, or itself failed by an injected fault (counted apart).
    if (after_failure && outcome != Outcome::kInjected) shared_->AfterFailure(matched);
    Note(outcome);
  }

  void Sampled() {
    static const char* kPrompts[] = {"Once upon a time", "Lily", "The cat", "One day, Tom",
                                     "She was happy"};
    v1::GenerateRequest request;
    request.set_model(kModel);
    request.set_prompt(kPrompts[rng_() % std::size(kPrompts)]);
    const int n = 8 + static_cast<int>(rng_() % 41);
    request.set_max_tokens(n);
    request.mutable_sampling()->set_temperature(0.8f);
    request.mutable_sampling()->set_top_p(0.95f);
    request.mutable_sampling()->set_seed(rng_());
    Generated g = RunGenerate(*client_, request);
    const Outcome outcome = shared_->Record("generate_sampled", g.status);
    if (outcome == Outcome::kOk && (!g.done || static_cast<int>(g.ids.size()) > n)) {
      shared_->Wrong("generate_sampled", absl::StrCat(g.ids.size(), " tokens for max ", n));
    }
    Note(outcome);
  }

  void Chat() {
    v1::GenerateRequest request;
    request.set_model(kModel);
    auto* chat = request.mutable_chat();
    if (rng_() % 2 == 0) {
      auto* system = chat->add_messages();
      system->set_role("system");
      system->set_content("Tell short stories.");
    }
    auto* user = chat->add_messages();
    user->set_role("user");
    user->set_content("Tell me about a dog.");
    request.set_max_tokens(8 + static_cast<int>(rng_() % 25));
    request.mutable_sampling()->set_temperature(0);
    Generated g = RunGenerate(*client_, request);
    const Outcome outcome = shared_->Record("chat", g.status);
    if (outcome == Outcome::kOk &&
        !shared_->SameAsFirst(absl::StrCat("chat/", request.ShortDebugString()), Ids(g.ids))) {
      shared_->Wrong("chat", "greedy chat gave different tokens than before");
    }
    Note(outcome);
  }

  // Cancelled after a few tokens: CANCELLED (or OK if it had finished).
  void Cancel() {
    static const std::vector<int32_t>& golden =
        *new std::vector<int32_t>(testing::StoriesGoldenIds());
    v1::GenerateRequest request;
    request.set_model(kModel);
    request.set_max_tokens(200);
    request.set_stop_at_eos(false);
    request.mutable_sampling()->set_temperature(0);
    const int after = 1 + static_cast<int>(rng_() % 20);
    Generated g = RunGenerate(*client_, request, after);
    const Outcome outcome =
        shared_->Record("generate_cancelled", g.status, {absl::StatusCode::kCancelled});
    if (outcome == Outcome::kOk || outcome == Outcome::kExpected) {
      const bool prefix =
          g.ids.size() <= golden.size() && std::equal(g.ids.begin(), g.ids.end(), golden.begin());
      if (!prefix) shared_->Wrong("generate_cancelled", "tokens before the cancel are not golden");
    }
    Note(outcome);
  }

  void Tokenize() {
    v1::TokenizeRequest request;
    request.set_model(kModel);
    request.set_text("Once upon a time, Lily saw a big dog.");
    request.set_add_special(true);
    auto tokens = client_->Tokenize(request);
    Outcome outcome = shared_->Record("tokenize", tokens.status());
    Note(outcome);
    if (outcome != Outcome::kOk) return;
    std::vector<int32_t> ids(tokens->ids().begin(), tokens->ids().end());
    if (!shared_->SameAsFirst("tokenize", Ids(ids))) {
      shared_->Wrong("tokenize", "different ids than before");
    }
    v1::DetokenizeRequest back;
    back.set_model(kModel);
    for (int32_t id : ids) back.add_ids(id);
    auto text = client_->Detokenize(back);
    outcome = shared_->Record("detokenize", text.status());
    Note(outcome);
    if (outcome == Outcome::kOk && text->text() != request.text()) {
      shared_->Wrong("detokenize", absl::StrCat("gave '", text->text(), "'"));
    }
  }

  // A kept session, sometimes saved by RPC, then continued: the
  // continuation's greedy tokens are always the same.
  void Session() {
    v1::GenerateRequest first;
    first.set_model(kModel);
    first.set_prompt("Lily");
    first.set_max_tokens(16);
    first.set_stop_at_eos(false);
    first.set_keep_session(true);
    first.mutable_sampling()->set_temperature(0);
    Generated a = RunGenerate(*client_, first);
    Outcome outcome = shared_->Record("session_start", a.status);
    Note(outcome);
    if (outcome != Outcome::kOk) return;
    if (rng_() % 2 == 0) {
      v1::SaveSessionRequest save;
      save.set_model(kModel);
      save.set_session_id(a.session_id);
      auto saved = client_->SaveSession(save);
      // NOT_FOUND ("is not open") when another client unloaded the model
      // meanwhile: that copy saved the kept session as it went, and the
      // continuation below finds it on disk.
      outcome = shared_->Record("save_session", saved.status(), {absl::StatusCode::kNotFound});
      Note(outcome);
      if (outcome == Outcome::kOk && saved->tokens() < 16) {
        shared_->Wrong("save_session", absl::StrCat("saved ", saved->tokens(), " tokens"));
      }
    }
    v1::GenerateRequest next = first;
    next.set_prompt(" and her mom");
    next.set_session_id(a.session_id);
    next.set_keep_session(false);
    Generated b = RunGenerate(*client_, next);
    outcome = shared_->Record("session_continue", b.status);
    Note(outcome);
    if (outcome == Outcome::kOk && !shared_->SameAsFirst("session", Ids(b.ids))) {
      shared_->Wrong("session_continue", "a continued session gave different tokens");
    }
  }

  void List() {
    auto models = client_->ListModels();
    const Outcome outcome = shared_->Record("list_models", models.status());
    Note(outcome);
    if (outcome != Outcome::kOk) return;
    bool found = false;
    for (const auto& m : models->models())
      found |= m.name() == kModel && m.unusable_reason().empty();
    if (!found) shared_->Wrong("list_models", "stories260K is missing or unusable");
  }

  void Stats() {
    auto stats = client_->GetStats(v1::GetStatsRequest());
    Note(shared_->Record("stats", stats.status()));
  }

  void Plan() {
    v1::PlanRequest request;
    request.set_model(kModel);
    auto plan = client_->Plan(request);
    Note(shared_->Record("plan", plan.status()));
  }

  void Load() {
    v1::LoadModelRequest request;
    request.set_model(kModel);
    auto loaded = client_->LoadModel(request);
    Note(shared_->Record("load", loaded.status()));
  }

  // Unloading while others generate: they finish on the old copy; the next
  // request loads it again. NOT_FOUND when another client unloaded it.
  void Unload() {
    v1::UnloadModelRequest request;
    request.set_model(kModel);
    auto unloaded = client_->UnloadModel(request);
    Note(shared_->Record("unload", unloaded.status(), {absl::StatusCode::kNotFound}));
  }

  const int index_;
  std::unique_ptr<WasteClient> client_;
  Shared* shared_;
  std::mt19937_64 rng_;
  const std::vector<std::string> only_;
  bool check_next_ = false;
};

// The median of `field` over the samples in [from, to): robust to the
// moments between a burst of requests and the daemon's next heap trim.
int64_t Median(const std::vector<RssSample>& samples, int64_t RssSample::*field,
               absl::Duration from, absl::Duration to) {
  std::vector<int64_t> values;
  for (const RssSample& s : samples) {
    if (s.at >= from && s.at < to) values.push_back(s.*field);
  }
  if (values.empty()) return -1;
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

}  // namespace

absl::StatusOr<SoakReport> RunSoak(const SoakOptions& options) {
  const std::string state_dir =
      options.state_dir.empty() ? testing::TempDir() + "/state" : options.state_dir;
  // Saved sessions bounded low, so the soak also exercises their LRU
  // deletion (and the directory stays small over an hour).
  const std::string config = testing::TempDir() + "/soak.toml";
  std::ofstream(config) << "max_saved_sessions_bytes = \"8MiB\"\n";
  std::vector<std::string> flags = {"--config",
                                    config,
                                    "--follow-symlinks",
                                    "--state-dir",
                                    state_dir,
                                    "--ctx",
                                    absl::StrCat(kContext),
                                    "--threads",
                                    absl::StrCat(options.threads),
                                    "--max-concurrent-requests",
                                    absl::StrCat(kSessions),
                                    "--log-level",
                                    "warning"};
  // The budget: the floor, plus KV caches for the other sessions; most
  // weights then stream through the pool at every token.
  int64_t budget = 0, per_token = 0;
  {
    testing::DaemonHarness probe(options.models_dir, flags);
    if (absl::Status s = probe.WaitUntilServing(); !s.ok()) return s;
    v1::PlanRequest request;
    request.set_model(kModel);
    request.set_context_length(kContext);
    request.set_max_concurrent_requests(kSessions);
    auto plan = probe.client().Plan(request);
    if (!plan.ok()) return plan.status();
    budget = plan->plan().floor_bytes() + (kSessions - 1) * plan->plan().session_bytes();
    request.set_ram_budget_bytes(budget);
    auto at_budget = probe.client().Plan(request);
    if (!at_budget.ok()) return at_budget.status();
    per_token = at_budget->plan().bytes_read_per_token();
    if (per_token <= 0) {
      return absl::InternalError(
          absl::StrCat("a budget of ", budget, " bytes streams nothing; the soak wants streaming"));
    }
  }
  flags.insert(flags.end(), {"--ram-budget", absl::StrCat(budget)});
  if (options.read_fault_rate > 0) {
    flags.insert(flags.end(), {"--inject-read-faults",
                               absl::StrCat(options.read_fault_rate, ":", options.seed)});
  }
  testing::DaemonHarness daemon(options.models_dir, flags);
  if (absl::Status s = daemon.WaitUntilServing(); !s.ok()) return s;
  const pid_t pid = daemon.process().pid();

  Shared shared(options.read_fault_rate > 0);
  std::atomic<bool> stop{false};
  const absl::Time start = absl::Now();
  const absl::Time measured_from = start + options.warmup;
  const absl::Time deadline = measured_from + options.duration;

  absl::Mutex rss_mu;
  std::vector<RssSample> rss;
  std::thread sampler([&] {
    while (!stop.load()) {
      const int64_t bytes = ProcStatusBytes(pid, "VmRSS");
      const int64_t anon = ProcStatusBytes(pid, "RssAnon");
      if (bytes > 0 && anon > 0) {
        absl::MutexLock lock(&rss_mu);
        rss.push_back({absl::Now() - measured_from, bytes, anon});
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
  });
  std::vector<std::thread> threads;
  for (int i = 0; i < options.clients; ++i) {
    threads.emplace_back([&, i] {
      Client client(i, "unix:" + daemon.socket(), &shared, options.seed, options.only_ops);
      while (!stop.load()) {
        client.RunOne();
        if (absl::Now() >= deadline ||
            (options.max_requests > 0 && shared.requests() >= options.max_requests)) {
          stop.store(true);
        }
      }
    });
  }
  absl::Time next_progress = start + options.progress_every;
  while (!stop.load()) {
    absl::SleepFor(absl::Milliseconds(200));
    if (options.progress_every > absl::ZeroDuration() && absl::Now() >= next_progress) {
      next_progress += options.progress_every;
      const SoakReport now = shared.Take();
      fprintf(stderr, "soak: %s: %lld requests, %lld unexpected errors, RSS %lld KiB\n",
              absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Seconds(1))).c_str(),
              static_cast<long long>(now.requests), static_cast<long long>(now.unexpected_errors),
              static_cast<long long>(ProcStatusBytes(pid, "VmRSS") / 1024));
    }
  }
  for (std::thread& t : threads) t.join();
  const absl::Time end = absl::Now();
  sampler.join();

  SoakReport report = shared.Take();
  report.measured = std::max(absl::ZeroDuration(), end - measured_from);
  report.ram_budget_bytes = budget;
  report.runtime_reserve_bytes = kRuntimeReserve;
  report.bytes_read_per_token = per_token;
  report.rss_peak = ProcStatusBytes(pid, "VmHWM");
  {
    absl::MutexLock lock(&rss_mu);
    const absl::Duration tenth = report.measured / 10;
    const absl::Duration last = report.measured - tenth,
                         end_of_run = report.measured + absl::Seconds(1);
    report.rss_first_tenth = Median(rss, &RssSample::bytes, absl::ZeroDuration(), tenth);
    report.rss_last_tenth = Median(rss, &RssSample::bytes, last, end_of_run);
    report.anon_first_tenth = Median(rss, &RssSample::anon, absl::ZeroDuration(), tenth);
    report.anon_last_tenth = Median(rss, &RssSample::anon, last, end_of_run);
    report.rss_samples = static_cast<int64_t>(rss.size());
    if (!options.rss_log.empty()) {
      std::ofstream log(options.rss_log);
      for (const RssSample& sample : rss) {
        log << absl::StrFormat("%.1f %d %d\n", absl::ToDoubleSeconds(sample.at), sample.bytes,
                               sample.anon);
      }
    }
  }
  if (report.anon_first_tenth > 0) {
    report.rss_drift = static_cast<double>(report.anon_last_tenth - report.anon_first_tenth) /
                       static_cast<double>(report.anon_first_tenth);
  }
  if (report.rss_first_tenth > 0) {
    report.vm_rss_drift = static_cast<double>(report.rss_last_tenth - report.rss_first_tenth) /
                          static_cast<double>(report.rss_first_tenth);
  }
  report.daemon_exit_code = daemon.process().Stop(SIGTERM);
  for (absl::string_view line : absl::StrSplit(daemon.process().Stderr(), '\n')) {
    const size_t at = line.find("read fault injection:");
    if (at == absl::string_view::npos) continue;
    report.fault_summary = std::string(line.substr(at));
    const size_t failed = line.find("failed_after_retries=");
    if (failed != absl::string_view::npos) {
      (void)absl::SimpleAtoi(line.substr(failed + 21), &report.reads_failed_after_retries);
    }
  }
  return report;
}

std::string SoakReport::ToText() const {
  std::string out = absl::StrFormat(
      "soak: %s measured, %d requests (%d unexpected errors, %d injected read failures)\n",
      absl::FormatDuration(absl::Trunc(measured, absl::Seconds(1))), requests, unexpected_errors,
      injected_failures);
  for (const auto& [op, c] : ops) {
    absl::StrAppendFormat(&out, "  %-20s ok %7d  expected %5d  injected %5d  unexpected %d\n", op,
                          c.ok, c.expected_errors, c.injected_failures, c.unexpected_errors);
  }
  absl::StrAppendFormat(&out, "golden: %d sequences checked, %d wrong\n", golden_checked,
                        golden_mismatches);
  if (injected_failures > 0) {
    absl::StrAppendFormat(&out, "after an injected failure: %d checked, %d correct\n",
                          checks_after_failure, correct_after_failure);
  }
  absl::StrAppendFormat(
      &out,
      "RSS (medians, %d samples): VmRSS first tenth %.2f MiB, last tenth %.2f MiB: drift "
      "%+.2f%%; private (anonymous) %.2f -> %.2f MiB: drift %+.2f%% (%+.0f KiB); peak %.2f MiB; "
      "budget %.2f MiB (runtime reserve %.0f MiB included), %d bytes read per token; memory "
      "%s\n",
      rss_samples, rss_first_tenth / 1048576.0, rss_last_tenth / 1048576.0, vm_rss_drift * 100,
      anon_first_tenth / 1048576.0, anon_last_tenth / 1048576.0, rss_drift * 100,
      (anon_last_tenth - anon_first_tenth) / 1024.0, rss_peak / 1048576.0,
      ram_budget_bytes / 1048576.0, runtime_reserve_bytes / 1048576.0, bytes_read_per_token,
      MemoryStable() ? "stable" : "NOT stable");
  absl::StrAppendFormat(&out, "daemon exit code %d\n", daemon_exit_code);
  if (!fault_summary.empty()) absl::StrAppend(&out, fault_summary, "\n");
  for (const std::string& e : error_samples) absl::StrAppend(&out, "  error: ", e, "\n");
  return out;
}

bool SoakReport::MemoryStable() const {
  const int64_t private_growth = anon_last_tenth - anon_first_tenth;
  return vm_rss_drift < 0.02 && (rss_drift < 0.02 || private_growth < kPrivateSlackBytes) &&
         rss_peak <= ram_budget_bytes + runtime_reserve_bytes;
}

std::string SoakReport::ToJson() const {
  nlohmann::ordered_json j;
  j["measured_seconds"] = absl::ToDoubleSeconds(measured);
  j["requests"] = requests;
  j["unexpected_errors"] = unexpected_errors;
  j["injected_failures"] = injected_failures;
  j["golden_checked"] = golden_checked;
  j["golden_mismatches"] = golden_mismatches;
  j["checks_after_failure"] = checks_after_failure;
  j["correct_after_failure"] = correct_after_failure;
  j["ram_budget_bytes"] = ram_budget_bytes;
  j["runtime_reserve_bytes"] = runtime_reserve_bytes;
  j["bytes_read_per_token"] = bytes_read_per_token;
  j["rss_first_tenth_bytes"] = rss_first_tenth;
  j["rss_last_tenth_bytes"] = rss_last_tenth;
  j["anon_first_tenth_bytes"] = anon_first_tenth;
  j["anon_last_tenth_bytes"] = anon_last_tenth;
  j["rss_drift"] = rss_drift;
  j["vm_rss_drift"] = vm_rss_drift;
  j["memory_stable"] = MemoryStable();
  j["rss_peak_bytes"] = rss_peak;
  j["rss_samples"] = rss_samples;
  j["daemon_exit_code"] = daemon_exit_code;
  j["reads_failed_after_retries"] = reads_failed_after_retries;
  j["fault_summary"] = fault_summary;
  for (const auto& [op, c] : ops) {
    j["ops"][op] = {{"ok", c.ok},
                    {"expected_errors", c.expected_errors},
                    {"injected_failures", c.injected_failures},
                    {"unexpected_errors", c.unexpected_errors}};
  }
  j["error_samples"] = error_samples;
  return j.dump(2);
}

}  // namespace waste::soak
