// `wasted bench`: prefill and decode under a RAM budget, in process, with
// the store's counters and this machine's memory bandwidth from the same run.
#include <fstream>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "client/cli_args.h"
#include "client/format.h"
#include "daemon/bench/commands.h"
#include "daemon/bench/memory_bandwidth.h"
#include "daemon/bench/model_budget.h"
#include "daemon/cache/streaming_store.h"
#include "daemon/config/config.h"
#include "daemon/kernels/thread_pool.h"
#include "daemon/model/forward.h"
#include "daemon/tools/json_writer.h"
#include "storage/env.h"
#include "storage/status_macros.h"

namespace waste::bench {
namespace {

constexpr char kBenchUsage[] = R"(usage: wasted bench MODEL [flags]

Loads MODEL under a RAM budget (everything resident when it fits, else
streaming through the plan's pool), prefills a fixed prompt, decodes
greedily, and prints prefill/decode tok/s, time to first token, bytes read
per token, hit rate, I/O wait share and read GB/s, next to this machine's
memory read bandwidth measured in the same run.

  --ram-budget SIZE       e.g. 8GiB (default: the plan's recommended size)
  --ctx N                 KV cache positions (default: prompt + gen tokens)
  --kv-type f16|f32       (default f16)
  --prompt-tokens N       prefill length (default 16)
  --gen-tokens N          tokens decoded (default 16)
  --threads N             compute threads (default 2)
  --policy lru|lfu        streaming cache policy (default lfu)
  --prefetch-depth D      chunks read ahead (default: the plan's)
  --io-engine E           auto, io_uring or threads (default auto)
  --buffered              read through the page cache (default O_DIRECT)
  --mem-bench-bytes SIZE  memory bandwidth buffer (default min(1GiB, budget/4))
  --json                  machine-readable output
)";

struct BenchResult {
  std::string mode;
  double load_seconds = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  int64_t prompt_tokens = 0, gen_tokens = 0;
  cache::ChunkStoreStats before, after;  // Around decode.
  cache::StreamingStoreStats streaming_before, streaming_after;
  uint64_t touched_bytes_per_token = 0;
  double memory_gbps = 0;
  int64_t peak_rss_bytes = 0;
};

int64_t PeakRssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      int64_t kib = 0;
      absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::StripSuffix(line.substr(6), "kB")), &kib);
      return kib * 1024;
    }
  }
  return 0;
}

// Weight bytes a dense decode step streams through the cores: every layer
// chunk, the output head and norm (not the embedding table: one row).
uint64_t TouchedBytesPerToken(const model::Model& model) {
  uint64_t bytes = 0;
  for (const cache::ChunkSpec& chunk : model.chunks()) {
    if (chunk.kind != cache::ChunkKind::kGlobal) bytes += chunk.tensor_bytes;
  }
  const model::GlobalTensors& g = model.globals();
  bytes += g.output.rows * g.output.row_bytes + g.output_norm.cols * sizeof(float);
  return bytes;
}

absl::StatusOr<storage::IoEngine> ParseEngine(const std::string& name) {
  if (name == "auto") return storage::IoEngine::kAuto;
  if (name == "io_uring") return storage::IoEngine::kIoUring;
  if (name == "threads") return storage::IoEngine::kThreads;
  return absl::InvalidArgumentError(
      absl::StrCat("--io-engine ", name, " is not auto, io_uring or threads"));
}

void Print(const BenchResult& r, const PlannedModel& pm, const memory::MemoryPlan& plan,
           const cache::StreamingChunkStore& store, bool json) {
  const double decode_tps = r.gen_tokens / r.decode_seconds;
  const double prefill_tps = r.prompt_tokens / r.prefill_seconds;
  const int64_t bytes = r.after.bytes_read - r.before.bytes_read;
  const double bytes_per_token = static_cast<double>(bytes) / r.gen_tokens;
  const int64_t pinned_hits = r.streaming_after.pinned_hits - r.streaming_before.pinned_hits;
  const int64_t streamed_hits = r.after.hits - r.before.hits - pinned_hits;
  const int64_t misses = r.after.misses - r.before.misses;
  const double hit_rate = streamed_hits + misses > 0
                              ? static_cast<double>(streamed_hits) / (streamed_hits + misses)
                              : 1;
  const double io_wait = r.after.io_wait_seconds - r.before.io_wait_seconds;
  const double busy = r.after.read_busy_seconds - r.before.read_busy_seconds;
  const double read_gbps = busy > 0 ? bytes / busy / 1e9 : 0;
  const double stream_gbps = bytes / r.decode_seconds / 1e9;
  const double touched_gbps = r.touched_bytes_per_token * decode_tps / 1e9;
  if (json) {
    tools::JsonWriter j;
    j.BeginObject();
    auto num = [&](const char* key, double v) { j.Key(key), j.Double(v); };
    auto integer = [&](const char* key, int64_t v) { j.Key(key), j.Int(v); };
    j.Key("model"), j.String(pm.path);
    j.Key("mode"), j.String(r.mode);
    j.Key("policy"), j.String(store.policy_name());
    j.Key("io_engine"), j.String(storage::IoEngineName(store.io_engine()));
    integer("budget_bytes", pm.budget_bytes);
    integer("pool_bytes", store.pool().bytes());
    j.Key("huge_pages"), j.Bool(store.pool().huge_pages());
    integer("pinned_layers", plan.pinned_layers);
    integer("layers", plan.n_layers);
    integer("streaming_slots", plan.streaming_slots);
    integer("prefetch_depth", store.prefetch_depth());
    num("load_seconds", r.load_seconds);
    integer("prompt_tokens", r.prompt_tokens);
    integer("gen_tokens", r.gen_tokens);
    num("prefill_tokens_per_second", prefill_tps);
    num("time_to_first_token_seconds", r.prefill_seconds);
    num("decode_tokens_per_second", decode_tps);
    num("read_bytes_per_token", bytes_per_token);
    integer("planned_read_bytes_per_token", plan.read_bytes_per_token);
    num("streamed_hit_rate", hit_rate);
    integer("prefetch_hits", r.after.prefetch_hits - r.before.prefetch_hits);
    integer("prefetch_wasted", r.after.prefetch_wasted - r.before.prefetch_wasted);
    num("io_wait_share", io_wait / r.decode_seconds);
    num("read_busy_gbps", read_gbps);
    num("stream_gbps", stream_gbps);
    integer("weight_bytes_touched_per_token", r.touched_bytes_per_token);
    num("achieved_memory_gbps", touched_gbps);
    num("memory_read_gbps", r.memory_gbps);
    integer("peak_rss_bytes", r.peak_rss_bytes);
    j.EndObject();
    std::cout << j.str() << "\n";
    return;
  }
  std::cout << absl::StrFormat(
      "model:          %s\n"
      "mode:           %s (budget %s, pool %s%s, %d/%d layers pinned, %d slots, prefetch %d, "
      "policy %s, %s)\n"
      "load:           %.2f s\n"
      "prefill:        %d tokens, %.2f tok/s (time to first token %.3f s)\n"
      "decode:         %d tokens, %.3f tok/s\n"
      "read per token: %s (planned %s)\n"
      "hit rate:       %.1f%% of streamed acquires (prefetch hits %d, wasted %d)\n"
      "I/O wait:       %.1f%% of decode time\n"
      "disk reads:     %.2f GB/s while reading, %.2f GB/s over decode\n"
      "memory:         %s touched per token = %.2f GB/s achieved; machine reads %.2f GB/s "
      "(2 threads) -> %.0f%%\n"
      "peak RSS:       %s (%.1f%% of budget)\n",
      pm.path, r.mode, FormatBytes(pm.budget_bytes), FormatBytes(store.pool().bytes()),
      store.pool().huge_pages() ? ", huge pages" : "", plan.pinned_layers, plan.n_layers,
      plan.streaming_slots, store.prefetch_depth(), store.policy_name(),
      storage::IoEngineName(store.io_engine()), r.load_seconds, r.prompt_tokens, prefill_tps,
      r.prefill_seconds, r.gen_tokens, decode_tps,
      FormatBytes(static_cast<int64_t>(bytes_per_token)), FormatBytes(plan.read_bytes_per_token),
      100 * hit_rate, r.after.prefetch_hits - r.before.prefetch_hits,
      r.after.prefetch_wasted - r.before.prefetch_wasted, 100 * io_wait / r.decode_seconds,
      read_gbps, stream_gbps, FormatBytes(r.touched_bytes_per_token), touched_gbps, r.memory_gbps,
      100 * touched_gbps / r.memory_gbps, FormatBytes(r.peak_rss_bytes),
      100.0 * r.peak_rss_bytes / pm.budget_bytes);
}

absl::Status Bench(const ParsedArgs& args) {
  ASSIGN_OR_RETURN(int64_t prompt, args.GetInt("prompt-tokens", 16));
  ASSIGN_OR_RETURN(int64_t gen, args.GetInt("gen-tokens", 16));
  ASSIGN_OR_RETURN(int64_t threads, args.GetInt("threads", 2));
  if (prompt < 1 || gen < 1 || threads < 1) {
    return absl::InvalidArgumentError(
        "--prompt-tokens, --gen-tokens and --threads must be positive");
  }
  ASSIGN_OR_RETURN(cache::PolicyKind policy, cache::ParsePolicyKind(args.GetOr("policy", "lfu")));
  ASSIGN_OR_RETURN(storage::IoEngine engine, ParseEngine(args.GetOr("io-engine", "auto")));
  ASSIGN_OR_RETURN(PlannedModel pm, OpenAndBudget(args.positional()[0], args, prompt + gen));
  ASSIGN_OR_RETURN(
      memory::MemoryPlan plan,
      memory::PlanMemory(pm.input, pm.budget_bytes, pm.options, pm.usable.bytes, pm.usable.source));
  BenchResult r;
  r.mode = plan.all_resident() ? "resident" : "streaming";
  r.prompt_tokens = prompt;
  r.gen_tokens = gen;
  r.touched_bytes_per_token = TouchedBytesPerToken(*pm.model);

  // Memory bandwidth first, its buffer gone before the weights arrive so
  // the peak RSS stays the model's.
  uint64_t mem_bytes = std::clamp<uint64_t>(pm.budget_bytes / 4, 256 << 20, 1 << 30);
  if (std::optional<std::string> text = args.Get("mem-bench-bytes")) {
    ASSIGN_OR_RETURN(int64_t b, ParseByteSize(*text));
    mem_bytes = static_cast<uint64_t>(b);
  }
  ASSIGN_OR_RETURN(r.memory_gbps, MeasureMemoryReadGbps(mem_bytes, 2));

  absl::Time start = absl::Now();
  storage::Env* env = storage::Env::Default();
  ASSIGN_OR_RETURN(std::unique_ptr<storage::RandomAccessFile> file,
                   env->NewRandomAccessFile(pm.path, {.direct = !args.Has("buffered")}));
  cache::StreamingStoreOptions options = cache::StreamingStoreOptions::FromPlan(plan);
  options.policy = policy;
  options.io.engine = engine;
  ASSIGN_OR_RETURN(std::unique_ptr<cache::StreamingChunkStore> store,
                   cache::StreamingChunkStore::Create(env, *file, pm.model->chunks(), options));
  r.load_seconds = absl::ToDoubleSeconds(absl::Now() - start);

  kernels::ThreadPool pool(static_cast<int>(threads));
  model::SequenceState state(*pm.model, pm.input.n_ctx, pm.kv_type);
  model::Forward forward(pm.model.get(), store.get(), &pool);
  const int64_t n_vocab = pm.model->hparams().n_vocab;
  std::vector<float> logits(n_vocab);
  std::vector<int32_t> tokens(prompt);
  tokens[0] = 1;  // BOS in llama vocabularies; any id works for timing.
  for (int64_t i = 1; i < prompt; ++i) tokens[i] = static_cast<int32_t>((i * 7919 + 3) % n_vocab);

  start = absl::Now();
  RETURN_IF_ERROR(forward.Run(&state, tokens, logits.data()));
  int32_t token =
      static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  r.prefill_seconds = absl::ToDoubleSeconds(absl::Now() - start);

  r.before = store->Stats();
  r.streaming_before = store->StreamingStats();
  start = absl::Now();
  for (int64_t i = 0; i < gen; ++i) {
    RETURN_IF_ERROR(forward.Run(&state, {&token, 1}, logits.data()));
    token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  r.decode_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  r.after = store->Stats();
  r.streaming_after = store->StreamingStats();
  r.peak_rss_bytes = PeakRssBytes();
  Print(r, pm, plan, *store, args.Has("json"));
  return absl::OkStatus();
}

}  // namespace

int RunBench(const std::vector<std::string>& args) {
  std::vector<FlagDef> flags = {
      {"json", false},         {"help", false},      {"buffered", false},
      {"prompt-tokens", true}, {"gen-tokens", true}, {"threads", true},
      {"policy", true},        {"io-engine", true},  {"mem-bench-bytes", true}};
  AddBudgetFlags(&flags);
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, flags);
  if (!parsed.ok()) {
    std::cerr << "wasted bench: " << parsed.status().message() << "\n\n" << kBenchUsage;
    return 2;
  }
  if (parsed->Has("help")) {
    std::cout << kBenchUsage;
    return 0;
  }
  if (parsed->positional().size() != 1) {
    std::cerr << "wasted bench: expected one MODEL path\n\n" << kBenchUsage;
    return 2;
  }
  absl::Status status = Bench(*parsed);
  if (!status.ok()) {
    std::cerr << "wasted bench: " << status.message() << "\n";
    return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}

}  // namespace waste::bench
