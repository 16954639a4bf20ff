// `wasted bench`: prefill and decode under a RAM budget, in process, with
// the store's counters and this machine's memory bandwidth from the same run.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/cli_args.h"
#include "common/format.h"
#include "common/status_macros.h"
#include "daemon/bench/commands.h"
#include "daemon/bench/compute_rate.h"
#include "daemon/bench/device_tier.h"
#include "daemon/bench/memory_bandwidth.h"
#include "daemon/bench/model_budget.h"
#include "daemon/bench/sessions_bench.h"
#include "daemon/cache/forwarding_store.h"
#include "daemon/cache/hotlist.h"
#include "daemon/cache/routing_trace.h"
#include "daemon/cache/streaming_store.h"
#include "daemon/config/config.h"
#include "daemon/kernels/cpu_features.h"
#include "daemon/kernels/thread_pool.h"
#include "daemon/model/forward.h"
#include "storage/env.h"
#include "storage/split_gguf.h"

namespace waste::bench {
namespace {

constexpr char kBenchUsage[] = R"(usage: wasted bench MODEL [flags]

Loads MODEL under a RAM budget (everything resident when it fits, else
streaming through the plan's pool), prefills a fixed prompt, decodes
greedily, and prints prefill/decode tok/s, time to first token, bytes read
per token, hit rate, I/O wait share and read GB/s, next to this machine's
memory read bandwidth measured in the same run and the share of the
machine's CPU time a hypervisor took from it (steal) while it ran.

  --ram-budget SIZE       e.g. 8GiB (default: the plan's recommended size)
  --vram-budget SIZE      GPU memory for the plan's VRAM tier: the trunk and
                          the hottest experts (with --hotlist, its order)
                          computed on the device; prints bytes per token per
                          tier and each tier's bound (default: none)
  --device D              cuda (default) or fake (the VRAM tier on the CPU)
  --ctx N                 KV cache positions (default: prompt + gen tokens)
  --kv-type f16|f32       (default f16)
  --prompt-tokens N       prefill length (default 16)
  --gen-tokens N          tokens decoded (default 16)
  --threads N             compute threads (default 2)
  --policy P              lru, lfu or lfu-aged (default: lfu-aged for MoE
                          experts, lfu for dense models)
  --lookahead-guesses N   read ahead each row's N likeliest predicted
                          experts (default: half of top-k, rounded up)
  --lookahead, --no-lookahead
                          router lookahead in decode (MoE; default: on when
                          experts stream, as in the daemon)
  --hotlist PATH          warm hotlist: preload the experts it names before
                          the prompt, save this run's counts to it after
  --prefill-one-by-one    prefill token at a time instead of the plan's steps
                          (64 tokens; 256 where weights stream)
  --sessions N[,N...]     concurrent requests through the engine's scheduler
                          (the daemon's batching), one round per N, e.g.
                          1,2,4,8: aggregate and per-session decode tok/s,
                          time to first token, bytes read per step and per
                          token (KV caches for the largest N must fit)
  --prefill-chunk N       (--sessions) prompt tokens per step (default: the
                          daemon's, 32; where weights stream the plan's step)
  --trace-out PATH        write decode's routing trace (MoE) to PATH
  --prefetch-depth D      chunks read ahead (default: the plan's)
  --io-engine E           auto, io_uring or threads (default auto)
  --buffered              read through the page cache (default O_DIRECT)
  --no-repack             keep resident matrices in the file's layout (default:
                          Q4_0, and on AVX2 Q8_0 and Q4_K, repacked at load)
  --mem-bench-bytes SIZE  memory bandwidth buffer (default min(1GiB, budget/4))
  --no-compute-probe      skip the in-cache kernel probes before the prompt
                          and after decode (the compute bound: each weight
                          type's kernel rate with its weights in cache, same
                          threads; the faster counts)
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
  // The machine's memory read rate, probed before the weights load and, room
  // permitting, again after decode (0: not probed); memory_gbps, the figure
  // decode is held to, is the faster of the two. The neighbours' load moves
  // it within a run, and the faster figure never flatters the share.
  double memory_gbps = 0, memory_gbps_before = 0, memory_gbps_after = 0;
  int threads = 0;  // Compute threads; the probes use as many.
  int64_t peak_rss_bytes = 0;
  // MoE.
  bool moe = false;
  model::MoeStats moe_before, moe_after;  // Around decode.
  cache::ChunkStoreStats prefill_before;  // After load, before the prompt.
  int hotlist_preloaded = -1;             // -1: no --hotlist.
  bool lookahead = false;
  // The host's steal over prefill and over decode (StealShare: nullopt where
  // /proc/stat gives none, or the phase ended within one clock tick).
  bool host_times = false;  // /proc/stat counts steal here.
  // The decode kernels' rates with the weights in cache (nullopt: not
  // probed), the third bound beside memory and disk.
  std::optional<ComputeBound> compute;
  std::optional<double> steal_prefill, steal_decode;
};

// Steal above this share of the machine's CPU time marks a run's figures as
// slowed by the host (its other guests), not by this program.
constexpr double kDisturbingSteal = 0.05;

// A probed type's name: "Q4_0", or "Q4_0 repacked" for the matrices the run
// holds in the resident layout.
std::string KernelName(const TypeBytes& t) {
  std::string name(kernels::GetWeightTypeInfo(t.type).name);
  return t.repacked ? name + " repacked" : name;
}

// "compute: ..." for the text output: each type's in-cache rate and share
// of the product bytes, and the tok/s they allow.
std::string ComputeLine(const BenchResult& r) {
  if (!r.compute) return "compute:        not probed\n";
  const ComputeBound& c = *r.compute;
  uint64_t total = 0;
  for (const TypeBytes& t : c.types) total += t.bytes;
  std::string line = "compute:        kernels in cache (faster of probes before and after)";
  for (size_t i = 0; i < c.types.size(); ++i) {
    absl::StrAppendFormat(&line, "%s %s %.1f GB/s (%.0f%% of bytes)", i == 0 ? "" : ",",
                          KernelName(c.types[i]), c.gbps[i],
                          100.0 * c.types[i].bytes / std::max<uint64_t>(1, total));
  }
  absl::StrAppendFormat(&line, " -> %.2f tok/s\n", 1 / c.seconds_per_token);
  return line;
}

// "host: ..." for the text output.
std::string StealLine(const BenchResult& r) {
  if (!r.host_times) return "host:           steal not known (no /proc/stat steal count)\n";
  if (!r.steal_decode)
    return "host:           decode ended within one clock tick: steal not counted\n";
  std::string line =
      absl::StrFormat("host:           hypervisor steal %.1f%% of the machine's CPU time in decode",
                      100 * *r.steal_decode);
  if (r.steal_prefill) absl::StrAppendFormat(&line, ", %.1f%% in prefill", 100 * *r.steal_prefill);
  if (std::max(*r.steal_decode, r.steal_prefill.value_or(0)) > kDisturbingSteal) {
    line += " (the host's other guests slowed this run: its figures are low)";
  }
  return line + "\n";
}

// Records which expert chunks decode acquires, for a routing trace.
class TraceStore final : public cache::ForwardingChunkStore {
 public:
  TraceStore(cache::ChunkStore* base, const model::Model& model)
      : ForwardingChunkStore(base), model_(model) {}
  absl::StatusOr<const uint8_t*> Acquire(memory::ChunkId id) override {
    if (recording_ && model_.chunks()[id].kind == memory::ChunkKind::kExpert)
      acquired_.push_back(id);
    // What the CPU computes on: the global chunk's output head, not the
    // embedding table (one row).
    const model::GlobalTensors& g = model_.globals();
    acquired_bytes_ += id == g.chunk ? g.output.rows * g.output.row_bytes
                                     : static_cast<int64_t>(model_.chunks()[id].tensor_bytes);
    return ForwardingChunkStore::Acquire(id);
  }
  int64_t acquired_bytes() const { return acquired_bytes_; }
  void set_recording(bool on) { recording_ = on; }

  // Expert chunk ids to (MoE layer, expert) rows of top_k.
  cache::RoutingTrace Trace() const {
    const model::HParams& hp = model_.hparams();
    cache::RoutingTrace t;
    t.n_layers = static_cast<int>(hp.n_layer - hp.moe.n_layer_dense_lead);
    t.n_experts = static_cast<int>(hp.moe.n_expert);
    t.top_k = static_cast<int>(hp.moe.n_expert_used);
    for (memory::ChunkId id : acquired_) {
      const int layer = model_.chunks()[id].layer;
      const memory::ChunkId first = model_.layers()[layer].experts[0].chunk;
      t.experts.push_back(id - first);
    }
    return t;
  }

 private:
  const model::Model& model_;
  bool recording_ = false;
  std::vector<memory::ChunkId> acquired_;
  int64_t acquired_bytes_ = 0;
};

TierCounters Counters(const DeviceTier& tier, const TraceStore& store,
                      const cache::ChunkStoreStats& stats) {
  TierCounters c;
  if (tier.weights != nullptr) c.weights = tier.weights->stats();
  c.acquired_bytes = store.acquired_bytes();
  c.bytes_read = stats.bytes_read;
  return c;
}

// Weight bytes a decode step streams through the cores: every layer chunk
// but routed experts, top-k experts per MoE layer (at the mean expert size),
// the output head and norm (not the embedding table: one row); a fused MLA
// file's derived keys in place of its key rows.
uint64_t TouchedBytesPerToken(const model::Model& model) {
  uint64_t bytes = 0, expert_bytes = 0, experts = 0;
  for (const memory::ChunkSpec& chunk : model.chunks()) {
    if (chunk.kind == memory::ChunkKind::kExpert) {
      expert_bytes += chunk.tensor_bytes;
      ++experts;
    } else if (chunk.layer >= 0) {
      bytes += chunk.tensor_bytes;
    }
  }
  const model::HParams& hp = model.hparams();
  if (experts > 0) {
    const uint64_t moe_layers = hp.n_layer - hp.moe.n_layer_dense_lead;
    bytes += moe_layers * hp.moe.n_expert_used * (expert_bytes / experts);
  }
  const model::GlobalTensors& g = model.globals();
  bytes += g.output.rows * g.output.row_bytes + g.output_norm.cols * sizeof(float);
  // A fused attn_kv_b's key rows are read as their derived copies.
  const model::DerivedWeightBytes derived = model::DerivedWeightBytesPerToken(model);
  return bytes - derived.replaced + derived.read;
}

absl::StatusOr<storage::IoEngine> ParseEngine(const std::string& name) {
  if (name == "auto") return storage::IoEngine::kAuto;
  if (name == "io_uring") return storage::IoEngine::kIoUring;
  if (name == "threads") return storage::IoEngine::kThreads;
  return absl::InvalidArgumentError(
      absl::StrCat("--io-engine ", name, " is not auto, io_uring or threads"));
}

// The bound a decode run is measured against: a token must bring its
// weights in from memory (the bytes it touches at the machine's measured
// read rate), multiply them through (its product bytes at the rates the
// kernels reach on this machine with the weights in cache) and, when
// streaming, read its missed bytes from disk (at the rate the reads ran at
// in this run): the bytes it read less read-ahead that went unused (wrong
// lookahead guesses cost read time, but are not what the token needed). The
// slowest of the three applies.
struct DecodeBound {
  const char* name = "memory";
  double tokens_per_second = 0;
  double achieved_share = 0;  // Measured decode tok/s over the bound.
};

DecodeBound DecodeBoundOf(double decode_tps, double touched_bytes_per_token, double memory_gbps,
                          double read_bytes_per_token, double read_gbps, double compute_seconds) {
  const double memory_seconds = memory_gbps > 0 ? touched_bytes_per_token / (memory_gbps * 1e9) : 0;
  const double read_seconds =
      read_gbps > 0 && read_bytes_per_token > 0 ? read_bytes_per_token / (read_gbps * 1e9) : 0;
  DecodeBound bound;
  if (compute_seconds > memory_seconds) bound.name = "compute";
  if (read_seconds > std::max(memory_seconds, compute_seconds)) bound.name = "disk read";
  const double seconds = std::max({memory_seconds, read_seconds, compute_seconds});
  if (seconds > 0) {
    bound.tokens_per_second = 1 / seconds;
    bound.achieved_share = decode_tps / bound.tokens_per_second;
  }
  return bound;
}

void Print(const BenchResult& r, const PlannedModel& pm, const memory::MemoryPlan& plan,
           const cache::StreamingChunkStore& store, const TierReport* tiers, bool json) {
  const double decode_tps = r.gen_tokens / r.decode_seconds;
  const double prefill_tps = r.prompt_tokens / r.prefill_seconds;
  const int64_t bytes = r.after.bytes_read - r.before.bytes_read;
  const double bytes_per_token = static_cast<double>(bytes) / r.gen_tokens;
  const int64_t wasted_bytes = r.after.wasted_bytes - r.before.wasted_bytes;
  const double needed_per_token =
      static_cast<double>(std::max<int64_t>(0, bytes - wasted_bytes)) / r.gen_tokens;
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
  const DecodeBound bound =
      DecodeBoundOf(decode_tps, static_cast<double>(r.touched_bytes_per_token), r.memory_gbps,
                    needed_per_token, read_gbps, r.compute ? r.compute->seconds_per_token : 0);
  if (json) {
    // Keys in the order written; non-finite numbers are written as null.
    nlohmann::ordered_json j;
    auto num = [&](const char* key, double v) { j[key] = v; };
    auto integer = [&](const char* key, int64_t v) { j[key] = v; };
    j["model"] = pm.path;
    j["cpu"] = CpuModelName();
    j["kernels"] = kernels::IsaName(kernels::DetectIsa());
    j["matrix_unit"] = kernels::MatrixUnitAvailable();
    integer("threads", r.threads);
    j["mode"] = r.mode;
    j["policy"] = store.policy_name();
    j["io_engine"] = storage::IoEngineName(store.io_engine());
    integer("budget_bytes", pm.budget_bytes);
    integer("pool_bytes", store.pool().bytes());
    j["huge_pages"] = store.pool().huge_pages();
    integer("pinned_layers", plan.pinned_layers);
    integer("layers", plan.n_layers);
    integer("streaming_slots", plan.streaming_slots);
    integer("large_slots", plan.large_slots);
    integer("prefetch_depth", store.prefetch_depth());
    num("load_seconds", r.load_seconds);
    integer("prompt_tokens", r.prompt_tokens);
    integer("step_tokens", plan.step_tokens);
    integer("gen_tokens", r.gen_tokens);
    num("prefill_tokens_per_second", prefill_tps);
    num("time_to_first_token_seconds", r.prefill_seconds);
    num("decode_tokens_per_second", decode_tps);
    num("read_bytes_per_token", bytes_per_token);
    num("needed_read_bytes_per_token", needed_per_token);
    integer("planned_read_bytes_per_token", plan.read_bytes_per_token);
    num("streamed_hit_rate", hit_rate);
    integer("prefetch_hits", r.after.prefetch_hits - r.before.prefetch_hits);
    integer("prefetch_wasted", r.after.prefetch_wasted - r.before.prefetch_wasted);
    integer("guesses_stopped", r.after.guesses_stopped - r.before.guesses_stopped);
    num("io_wait_share", io_wait / r.decode_seconds);
    num("read_busy_gbps", read_gbps);
    num("stream_gbps", stream_gbps);
    integer("weight_bytes_touched_per_token", r.touched_bytes_per_token);
    num("achieved_memory_gbps", touched_gbps);
    num("memory_read_gbps", r.memory_gbps);
    num("memory_read_gbps_before", r.memory_gbps_before);
    num("memory_read_gbps_after", r.memory_gbps_after);
    integer("peak_rss_bytes", r.peak_rss_bytes);
    j["bound"] = bound.name;
    num("bound_tokens_per_second", bound.tokens_per_second);
    num("bound_achieved_share", bound.achieved_share);
    auto optional_num = [&](const char* key, std::optional<double> v) {
      if (v) {
        j[key] = *v;
      } else {
        j[key] = nullptr;
      }
    };
    if (r.compute) {
      num("compute_bound_tokens_per_second", 1 / r.compute->seconds_per_token);
      nlohmann::ordered_json& kernels_json = j["kernel_gbps_in_cache"] =
          nlohmann::ordered_json::object();
      for (size_t i = 0; i < r.compute->types.size(); ++i) {
        kernels_json[KernelName(r.compute->types[i])] = r.compute->gbps[i];
      }
    } else {
      j["compute_bound_tokens_per_second"] = nullptr;
    }
    optional_num("steal_share_prefill", r.steal_prefill);
    optional_num("steal_share_decode", r.steal_decode);
    if (r.moe) {
      const double prefill_bytes = r.before.bytes_read - r.prefill_before.bytes_read;
      num("prefill_read_bytes_per_token", prefill_bytes / r.prompt_tokens);
      num("expert_cache_fraction", plan.expert_cache_fraction);
      integer("lookahead_hits", r.moe_after.lookahead_hits - r.moe_before.lookahead_hits);
      integer("lookahead_routed", r.moe_after.lookahead_routed - r.moe_before.lookahead_routed);
      integer("hotlist_preloaded", r.hotlist_preloaded);
      num("disk_bound_tokens_per_second",
          needed_per_token > 0 ? read_gbps * 1e9 / needed_per_token : 0);
    }
    if (tiers != nullptr) AddTierJson(*tiers, &j);
    // A path need not be UTF-8: replace bad bytes rather than throw.
    std::cout << j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
    return;
  }
  const std::string large_slots =
      plan.large_slots > 0
          ? absl::StrCat(" (", plan.large_slots, " of ", FormatBytes(plan.large_slot_bytes), ")")
          : "";
  std::cout << absl::StrFormat(
      "model:          %s\n"
      "cpu:            %s\n"
      "mode:           %s (budget %s, pool %s%s, %d/%d layers pinned, %d slots%s, prefetch %d, "
      "policy %s, %s)\n"
      "load:           %.2f s\n"
      "prefill:        %d tokens in steps of %d, %.2f tok/s (time to first token %.3f s)\n"
      "decode:         %d tokens, %.3f tok/s\n"
      "read per token: %s (%s of it needed; planned %s)\n"
      "hit rate:       %.1f%% of streamed acquires (prefetch hits %d, wasted %d, guesses stopped "
      "%d)\n"
      "I/O wait:       %.1f%% of decode time\n"
      "disk reads:     %.2f GB/s while reading, %.2f GB/s over decode\n"
      "memory:         %s touched per token = %.2f GB/s achieved; machine reads %.2f GB/s "
      "(%s) -> %.0f%%\n"
      "peak RSS:       %s (%.1f%% of budget)\n"
      "bound:          %s, %.2f tok/s -> decode achieved %.0f%% of it\n",
      pm.path, MachineSummary(r.threads), r.mode, FormatBytes(pm.budget_bytes),
      FormatBytes(store.pool().bytes()), store.pool().huge_pages() ? ", huge pages" : "",
      plan.pinned_layers, plan.n_layers, plan.streaming_slots, large_slots, store.prefetch_depth(),
      store.policy_name(), storage::IoEngineName(store.io_engine()), r.load_seconds,
      r.prompt_tokens, plan.step_tokens, prefill_tps, r.prefill_seconds, r.gen_tokens, decode_tps,
      FormatBytes(static_cast<int64_t>(bytes_per_token)),
      FormatBytes(static_cast<int64_t>(needed_per_token)), FormatBytes(plan.read_bytes_per_token),
      100 * hit_rate, r.after.prefetch_hits - r.before.prefetch_hits,
      r.after.prefetch_wasted - r.before.prefetch_wasted,
      r.after.guesses_stopped - r.before.guesses_stopped, 100 * io_wait / r.decode_seconds,
      read_gbps, stream_gbps, FormatBytes(r.touched_bytes_per_token), touched_gbps, r.memory_gbps,
      r.memory_gbps_after > 0 ? absl::StrFormat("same threads; %.2f before decode, %.2f after",
                                                r.memory_gbps_before, r.memory_gbps_after)
                              : std::string("same threads, before decode"),
      100 * touched_gbps / r.memory_gbps, FormatBytes(r.peak_rss_bytes),
      100.0 * r.peak_rss_bytes / pm.budget_bytes, bound.name, bound.tokens_per_second,
      100 * bound.achieved_share);
  std::cout << ComputeLine(r) << StealLine(r);
  if (tiers != nullptr) std::cout << TierText(*tiers);
  if (r.moe) {
    const double prefill_bytes = r.before.bytes_read - r.prefill_before.bytes_read;
    const int64_t la_routed = r.moe_after.lookahead_routed - r.moe_before.lookahead_routed;
    const int64_t la_hits = r.moe_after.lookahead_hits - r.moe_before.lookahead_hits;
    std::cout << absl::StrFormat(
        "experts:        cache %.1f%% of the experts; prefill read %s per prompt token; "
        "decode %s per token = %.2f tok/s at the %.2f GB/s reads ran at (achieved %.0f%%)\n"
        "lookahead:      %s",
        100 * plan.expert_cache_fraction,
        FormatBytes(static_cast<int64_t>(prefill_bytes / r.prompt_tokens)),
        FormatBytes(static_cast<int64_t>(bytes_per_token)),
        bytes_per_token > 0 ? read_gbps * 1e9 / bytes_per_token : 0, read_gbps,
        bytes_per_token > 0 ? 100 * decode_tps / (read_gbps * 1e9 / bytes_per_token) : 0,
        r.lookahead
            ? absl::StrFormat("on, %.1f%% of routed experts guessed (%d/%d)\n",
                              la_routed > 0 ? 100.0 * la_hits / la_routed : 0, la_hits, la_routed)
            : std::string("off\n"));
    if (r.hotlist_preloaded >= 0) {
      std::cout << "hotlist:        " << r.hotlist_preloaded << " experts preloaded\n";
    }
  }
}

absl::Status Bench(const ParsedArgs& args) {
  ASSIGN_OR_RETURN(int64_t prompt, args.GetInt("prompt-tokens", 16));
  ASSIGN_OR_RETURN(int64_t gen, args.GetInt("gen-tokens", 16));
  ASSIGN_OR_RETURN(int64_t threads, args.GetInt("threads", 2));
  if (prompt < 1 || gen < 1 || threads < 1) {
    return absl::InvalidArgumentError(
        "--prompt-tokens, --gen-tokens and --threads must be positive");
  }
  ASSIGN_OR_RETURN(const int64_t guesses, args.GetInt("lookahead-guesses", 0));
  if (guesses < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--lookahead-guesses must be 0 (half of top-k) or more, got ", guesses));
  }
  std::optional<cache::PolicyKind> policy;
  if (std::optional<std::string> name = args.Get("policy")) {
    ASSIGN_OR_RETURN(policy, cache::ParsePolicyKind(*name));
  }
  ASSIGN_OR_RETURN(storage::IoEngine engine, ParseEngine(args.GetOr("io-engine", "auto")));
  ASSIGN_OR_RETURN(std::vector<int> sessions, ParseSessions(args, 1));
  const bool batched = args.Has("sessions");
  // Every round's sessions hold their own context.
  ASSIGN_OR_RETURN(PlannedModel pm, OpenAndBudget(args.positional()[0], args, prompt + gen + 8));
  const std::optional<std::string> hotlist_path = args.Get("hotlist");
  if (pm.options.vram_budget_bytes > 0 && hotlist_path) {
    // The hottest experts claim VRAM first.
    storage::Env* env = storage::Env::Default();
    absl::StatusOr<cache::ModelFileIdentity> id =
        cache::IdentifyModelFile(env, pm.path, pm.model->chunks());
    absl::StatusOr<std::vector<cache::HotlistEntry>> hot =
        id.ok() ? cache::LoadHotlist(env, *hotlist_path, *id, pm.model->chunks()) : id.status();
    if (hot.ok()) {
      for (const cache::HotlistEntry& e : *hot) pm.input.expert_preference.push_back(e.chunk);
    }
  }
  ASSIGN_OR_RETURN(
      memory::MemoryPlan plan,
      memory::PlanMemory(pm.input, pm.budget_bytes, pm.options, pm.usable.bytes, pm.usable.source));
  BenchResult r;
  r.mode = plan.all_resident() ? "resident" : "streaming";
  if (plan.vram.enabled()) r.mode += " + VRAM";
  r.prompt_tokens = prompt;
  r.gen_tokens = gen;
  r.touched_bytes_per_token = TouchedBytesPerToken(*pm.model);

  // Memory bandwidth first, its buffer gone before the weights arrive.
  uint64_t mem_bytes = std::clamp<uint64_t>(pm.budget_bytes / 4, 256 << 20, 1 << 30);
  if (std::optional<std::string> text = args.Get("mem-bench-bytes")) {
    ASSIGN_OR_RETURN(int64_t b, ParseByteSize(*text));
    mem_bytes = static_cast<uint64_t>(b);
  }
  r.threads = static_cast<int>(threads);
  ASSIGN_OR_RETURN(r.memory_gbps_before, MeasureMemoryReadGbps(mem_bytes, r.threads));
  r.memory_gbps = r.memory_gbps_before;
  // VmHWM is a high-water mark: reset it so the probe's buffer, now freed,
  // does not count as the model's peak ("5" resets it; Linux >= 4.0).
  if (std::FILE* refs = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", refs);
    std::fclose(refs);
  }

  if (batched) {
    return BenchSessions(pm, plan, sessions, prompt, gen, static_cast<int>(threads), args,
                         r.memory_gbps);
  }

  absl::Time start = absl::Now();
  storage::Env* env = storage::Env::Default();
  ASSIGN_OR_RETURN(std::unique_ptr<storage::RandomAccessFile> file,
                   storage::OpenModelFile(env, *pm.gguf, {.direct = !args.Has("buffered")}));
  cache::StreamingStoreOptions options = cache::StreamingStoreOptions::FromPlan(plan);
  if (policy) options.policy = *policy;
  options.io.engine = engine;
  if (!args.Has("no-repack")) {
    options.repack_pinned = [&pm](memory::ChunkId id, uint8_t* slot) {
      model::InterleaveChunk(*pm.model, id, slot);
    };
  }
  ASSIGN_OR_RETURN(std::unique_ptr<cache::StreamingChunkStore> store,
                   cache::StreamingChunkStore::Create(env, *file, pm.model->chunks(), options));
  ASSIGN_OR_RETURN(DeviceTier tier,
                   OpenDeviceTier(args.GetOr("device", "cuda"), *pm.model, *file, plan));
  r.moe = plan.sizes.moe;
  cache::ModelFileIdentity identity;
  std::vector<cache::HotlistEntry> previous;
  if (hotlist_path) {
    ASSIGN_OR_RETURN(identity, cache::IdentifyModelFile(env, pm.path, pm.model->chunks()));
    ASSIGN_OR_RETURN(previous,
                     cache::WarmExpertCache(env, *hotlist_path, identity, pm.model->chunks(),
                                            store.get(), &r.hotlist_preloaded));
  }
  r.load_seconds = absl::ToDoubleSeconds(absl::Now() - start);

  kernels::ThreadPool pool(static_cast<int>(threads));
  model::SequenceState state(*pm.model, pm.input.n_ctx, pm.kv_type);
  TraceStore trace_store(store.get(), *pm.model);
  model::Forward forward(pm.model.get(), &trace_store, &pool,
                         {.max_step_tokens = plan.step_tokens});
  forward.set_device_weights(tier.weights.get());
  r.lookahead = args.Has("no-lookahead") ? false
                : args.Has("lookahead")  ? true
                                         : plan.lookahead_by_default();
  forward.set_router_lookahead(r.lookahead);
  forward.set_lookahead_guesses(static_cast<int>(guesses));
  const int64_t n_vocab = pm.model->hparams().n_vocab;
  std::vector<float> logits(n_vocab);
  std::vector<int32_t> tokens(prompt);
  tokens[0] = 1;  // BOS in llama vocabularies; any id works for timing.
  for (int64_t i = 1; i < prompt; ++i) tokens[i] = static_cast<int32_t>((i * 7919 + 3) % n_vocab);

  // The kernels' in-cache rates, probed before the prompt and again after
  // decode (the faster counts, as for memory). Resident runs hold their
  // matrices in the resident layouts (unless --no-repack); streamed chunks
  // keep the file's. With a VRAM tier part of the products run on the
  // device: its tier report has the bounds.
  const bool compute_probe = !args.Has("no-compute-probe") && tier.weights == nullptr;
  const bool repacked = plan.all_resident() && !args.Has("no-repack");
  if (compute_probe) {
    ASSIGN_OR_RETURN(r.compute, MeasureComputeBound(*pm.model, repacked, r.threads));
  }
  r.prefill_before = store->Stats();
  const std::optional<HostCpuTimes> host_before_prefill = ReadHostCpuTimes();
  start = absl::Now();
  const bool matrix_prompt = model::MatrixPrompt(prompt);  // As the engine decides.
  if (args.Has("prefill-one-by-one")) {
    for (int32_t t : tokens) {
      RETURN_IF_ERROR(forward.Run(&state, {&t, 1}, logits.data(), false, matrix_prompt));
    }
  } else {
    RETURN_IF_ERROR(forward.Run(&state, tokens, logits.data(), false, matrix_prompt));
  }
  int32_t token =
      static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  r.prefill_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const std::optional<HostCpuTimes> host_before_decode = ReadHostCpuTimes();
  r.host_times = host_before_prefill.has_value();
  r.steal_prefill = StealShare(host_before_prefill, host_before_decode);

  r.before = store->Stats();
  r.streaming_before = store->StreamingStats();
  r.moe_before = forward.moe_stats();
  TierCounters tiers_before = Counters(tier, trace_store, r.before);
  trace_store.set_recording(true);
  start = absl::Now();
  for (int64_t i = 0; i < gen; ++i) {
    RETURN_IF_ERROR(forward.Run(&state, {&token, 1}, logits.data()));
    token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  r.decode_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  r.steal_decode = StealShare(host_before_decode, ReadHostCpuTimes());
  r.after = store->Stats();
  r.streaming_after = store->StreamingStats();
  r.moe_after = forward.moe_stats();
  r.peak_rss_bytes = PeakRssBytes();  // Before a second probe adds its buffer.
  if (compute_probe) {
    ASSIGN_OR_RETURN(const ComputeBound after, MeasureComputeBound(*pm.model, repacked, r.threads));
    r.compute = FasterOf(*r.compute, after);
  }
  if (pm.usable.bytes > 0 && pm.budget_bytes + mem_bytes <= pm.usable.bytes) {
    ASSIGN_OR_RETURN(r.memory_gbps_after, MeasureMemoryReadGbps(mem_bytes, r.threads));
    r.memory_gbps = std::max(r.memory_gbps, r.memory_gbps_after);
  }
  std::optional<TierReport> tiers;
  if (tier.weights != nullptr) {
    const double busy = r.after.read_busy_seconds - r.before.read_busy_seconds;
    const double read_gbps =
        busy > 0 ? static_cast<double>(r.after.bytes_read - r.before.bytes_read) / busy / 1e9 : 0;
    tiers = MakeTierReport(tier, tiers_before, Counters(tier, trace_store, r.after), gen,
                           r.decode_seconds, r.memory_gbps, read_gbps, plan);
  }
  if (hotlist_path) {
    RETURN_IF_ERROR(cache::SaveHotlist(env, *hotlist_path, identity, pm.model->chunks(),
                                       store->acquire_counts(), previous));
  }
  if (std::optional<std::string> trace_path = args.Get("trace-out")) {
    RETURN_IF_ERROR(
        storage::WriteFileAtomically(env, *trace_path, cache::FormatTrace(trace_store.Trace())));
  }
  Print(r, pm, plan, *store, tiers ? &*tiers : nullptr, args.Has("json"));
  return absl::OkStatus();
}

}  // namespace

int RunBench(const std::vector<std::string>& args) {
  std::vector<FlagDef> flags = {{"json", false},
                                {"help", false},
                                {"buffered", false},
                                {"prompt-tokens", true},
                                {"gen-tokens", true},
                                {"threads", true},
                                {"policy", true},
                                {"io-engine", true},
                                {"mem-bench-bytes", true},
                                {"lookahead", false},
                                {"no-lookahead", false},
                                {"lookahead-guesses", true},
                                {"no-repack", false},
                                {"hotlist", true},
                                {"prefill-one-by-one", false},
                                {"trace-out", true},
                                {"prefill-chunk", true},
                                {"device", true},
                                {"no-compute-probe", false}};
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
