#include "daemon/http/metrics_page.h"

#include <functional>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/metrics/prometheus_text.h"

namespace waste::http {
namespace {

using metrics::Labels;
using metrics::PrometheusText;

struct Loaded {
  std::string name;
  v1::ModelStats stats;
};

// One family with a sample per loaded model.
struct PerModel {
  const char* name;
  const char* type;
  const char* help;
  std::function<double(const v1::ModelStats&)> value;
};

const std::vector<PerModel>& PerModelFamilies() {
  static const std::vector<PerModel> kFamilies = {
      {"waste_decode_tokens_per_second", "gauge",
       "Generated tokens per second over the model's last request.",
       [](const v1::ModelStats& s) { return s.last_decode_tokens_per_second(); }},
      {"waste_cache_hits_total", "counter",
       "Weight chunks (layers, experts) found resident in the pool when needed.",
       [](const v1::ModelStats& s) { return static_cast<double>(s.totals().cache_hits()); }},
      {"waste_cache_misses_total", "counter",
       "Weight chunks (layers, experts) that had to be read from disk.",
       [](const v1::ModelStats& s) { return static_cast<double>(s.totals().cache_misses()); }},
      {"waste_prefetch_hits_total", "counter", "Chunks read ahead of need that were used.",
       [](const v1::ModelStats& s) { return static_cast<double>(s.totals().prefetch_hits()); }},
      {"waste_prefetch_wasted_total", "counter",
       "Chunks read ahead of need that were evicted unused.",
       [](const v1::ModelStats& s) { return static_cast<double>(s.totals().prefetch_wasted()); }},
      {"waste_disk_read_bytes_total", "counter", "Bytes of weights read from the model file.",
       [](const v1::ModelStats& s) { return static_cast<double>(s.totals().bytes_read()); }},
      {"waste_disk_read_retries_total", "counter", "Weight reads that failed and were retried.",
       [](const v1::ModelStats& s) { return static_cast<double>(s.totals().read_retries()); }},
      {"waste_io_wait_seconds_total", "counter",
       "Time the compute threads waited for weight reads.",
       [](const v1::ModelStats& s) { return s.totals().io_wait_ms() / 1e3; }},
      {"waste_compute_seconds_total", "counter", "Time spent computing steps.",
       [](const v1::ModelStats& s) { return s.totals().compute_ms() / 1e3; }},
      {"waste_engine_tokens_total", "counter",
       "Tokens the model computed: prompt tokens not found in a session's cache, plus generated.",
       [](const v1::ModelStats& s) { return static_cast<double>(s.totals().tokens()); }},
      {"waste_pool_used_bytes", "gauge", "Bytes of the streaming pool holding weights now.",
       [](const v1::ModelStats& s) { return static_cast<double>(s.totals().pool_used_bytes()); }},
      {"waste_pool_capacity_bytes", "gauge", "Size of the streaming pool.",
       [](const v1::ModelStats& s) {
         return static_cast<double>(s.totals().pool_capacity_bytes());
       }},
      {"waste_ram_used_bytes", "gauge",
       "RAM in use under the model's budget: pinned weights, pool, KV caches, scratch.",
       [](const v1::ModelStats& s) { return static_cast<double>(s.ram_used_bytes()); }},
      {"waste_ram_budget_bytes", "gauge", "The model's RAM budget.",
       [](const v1::ModelStats& s) { return static_cast<double>(s.ram_budget_bytes()); }},
      {"waste_running_requests", "gauge", "Requests in the model's batch now.",
       [](const v1::ModelStats& s) { return static_cast<double>(s.running_requests()); }},
      {"waste_queued_requests", "gauge", "Requests waiting for a place in the batch.",
       [](const v1::ModelStats& s) { return static_cast<double>(s.queued_requests()); }},
      {"waste_max_concurrent_requests", "gauge", "Requests the model runs together at most.",
       [](const v1::ModelStats& s) { return static_cast<double>(s.max_concurrent_requests()); }},
      {"waste_max_queued_requests", "gauge",
       "Requests that may wait; more are refused (HTTP 429, gRPC RESOURCE_EXHAUSTED).",
       [](const v1::ModelStats& s) { return static_cast<double>(s.max_queued_requests()); }},
      {"waste_sessions", "gauge", "Open sessions (KV caches kept for follow-ups).",
       [](const v1::ModelStats& s) { return static_cast<double>(s.sessions()); }},
      {"waste_steps_total", "counter", "Steps run (one pass over the weights each).",
       [](const v1::ModelStats& s) { return static_cast<double>(s.steps()); }},
      {"waste_step_tokens_total", "counter", "Tokens carried by the steps.",
       [](const v1::ModelStats& s) { return static_cast<double>(s.step_tokens()); }},
      {"waste_batch_size_mean", "gauge", "Mean sessions per step since the model loaded.",
       [](const v1::ModelStats& s) { return s.mean_batch_size(); }},
      {"waste_batch_size_max", "gauge", "Most sessions in one step since the model loaded.",
       [](const v1::ModelStats& s) { return static_cast<double>(s.max_batch_size()); }},
      {"waste_queue_wait_mean_seconds", "gauge",
       "Mean time a request waited in the queue before joining the batch.",
       [](const v1::ModelStats& s) { return s.mean_queue_ms() / 1e3; }},
  };
  return kFamilies;
}

void RequestFamilies(const metrics::RequestMetrics& metrics, PrometheusText* out) {
  const std::map<std::string, metrics::ModelRequestCounters> models = metrics.Snapshot();
  out->Family("waste_requests_total", "counter",
              "Generate requests finished, by model, API (grpc, http) and outcome (ok, or the "
              "status code that ended them: cancelled, resource_exhausted, ...).");
  for (const auto& [model, counters] : models) {
    for (const auto& [key, count] : counters.requests) {
      out->Sample("waste_requests_total",
                  {{"model", model}, {"api", key.first}, {"outcome", key.second}},
                  static_cast<double>(count));
    }
  }
  out->Family("waste_prompt_tokens_total", "counter", "Prompt tokens of requests.");
  for (const auto& [model, counters] : models) {
    out->Sample("waste_prompt_tokens_total", {{"model", model}},
                static_cast<double>(counters.prompt_tokens));
  }
  out->Family("waste_generated_tokens_total", "counter", "Tokens generated for requests.");
  for (const auto& [model, counters] : models) {
    out->Sample("waste_generated_tokens_total", {{"model", model}},
                static_cast<double>(counters.generated_tokens));
  }
  out->Family("waste_time_to_first_token_seconds", "histogram",
              "Time from receiving a request to its first generated token (model load, queue "
              "and prompt included).");
  for (const auto& [model, counters] : models) {
    if (counters.time_to_first_token.count == 0) continue;
    out->HistogramSamples("waste_time_to_first_token_seconds", {{"model", model}},
                          counters.time_to_first_token);
  }
  out->Family("waste_time_per_output_token_seconds", "histogram",
              "Time between consecutive generated tokens of a request.");
  for (const auto& [model, counters] : models) {
    if (counters.time_per_output_token.count == 0) continue;
    out->HistogramSamples("waste_time_per_output_token_seconds", {{"model", model}},
                          counters.time_per_output_token);
  }

  const metrics::RequestMetrics::HttpCounters http = metrics.Http();
  out->Family("waste_http_responses_total", "counter",
              "HTTP responses, by endpoint and status code.");
  for (const auto& [key, count] : http.responses) {
    out->Sample("waste_http_responses_total",
                {{"endpoint", key.first}, {"code", absl::StrCat(key.second)}},
                static_cast<double>(count));
  }
  out->Family("waste_http_connections_total", "counter", "HTTP connections accepted.");
  out->Sample("waste_http_connections_total", {}, static_cast<double>(http.connections));
  out->Family("waste_http_rejected_connections_total", "counter",
              "HTTP connections answered 503 at once: the connection limit was reached.");
  out->Sample("waste_http_rejected_connections_total", {},
              static_cast<double>(http.rejected_connections));
  out->Family("waste_http_open_connections", "gauge", "HTTP connections open now.");
  out->Sample("waste_http_open_connections", {}, static_cast<double>(http.open_connections));
}

}  // namespace

std::string RenderMetricsPage(engine::Engine& engine, const metrics::RequestMetrics* metrics,
                              absl::Time started) {
  PrometheusText out;
  out.Family("waste_start_time_seconds", "gauge", "When the daemon started, in Unix seconds.");
  out.Sample("waste_start_time_seconds", {}, absl::ToDoubleSeconds(started - absl::UnixEpoch()));
  out.Family("waste_models_available", "gauge", "Models in the models directories.");
  out.Sample("waste_models_available", {}, static_cast<double>(engine.catalog().Scan().size()));

  std::vector<Loaded> loaded;
  for (const std::shared_ptr<engine::LoadedModel>& model : engine.Loaded()) {
    loaded.push_back({model->name(), model->Stats()});
  }
  out.Family("waste_models_loaded", "gauge", "Models loaded now.");
  out.Sample("waste_models_loaded", {}, static_cast<double>(loaded.size()));
  for (const PerModel& family : PerModelFamilies()) {
    out.Family(family.name, family.type, family.help);
    for (const Loaded& model : loaded) {
      out.Sample(family.name, {{"model", model.name}}, family.value(model.stats));
    }
  }
  if (metrics != nullptr) RequestFamilies(*metrics, &out);
  return out.Take();
}

}  // namespace waste::http
