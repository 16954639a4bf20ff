// Per-request counters and latency histograms that both faces of the
// daemon feed (the gRPC Generate reactor and the HTTP completions), so
// /metrics reports every request whichever way it came in. The engine's own
// counters (cache, I/O, memory, batch) are read from the loaded models when
// /metrics is rendered; these are what only the faces see: a request's
// outcome and when its tokens reached the transport.
//
// Thread-safe. Recording takes one short mutex; a request's recorder
// (RequestRecorder) is called on the model's scheduler thread.
#ifndef WASTE_DAEMON_METRICS_REQUEST_METRICS_H_
#define WASTE_DAEMON_METRICS_REQUEST_METRICS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "waste/v1/generate.pb.h"

namespace waste::metrics {

// A fixed-bucket histogram (Prometheus semantics: an observation counts in
// the first bucket whose upper bound it does not exceed; +Inf is implicit).
struct Histogram {
  explicit Histogram(std::vector<double> upper_bounds = {});
  void Observe(double value);

  std::vector<double> bounds;    // Ascending upper bounds, +Inf excluded.
  std::vector<uint64_t> counts;  // Per bucket, not cumulative; bounds.size() + 1.
  double sum = 0;
  uint64_t count = 0;
};

// Bucket bounds in seconds. Time to first token spans a warm tiny model
// (milliseconds) to a cold load of a large one (a minute); the time per
// output token spans a resident model to one streamed from disk.
const std::vector<double>& TimeToFirstTokenBuckets();
const std::vector<double>& TimePerOutputTokenBuckets();

// What was recorded for one model.
struct ModelRequestCounters {
  ModelRequestCounters();
  // Finished requests by (api, outcome): api is "grpc" or "http", outcome
  // "ok" or the lower-case status code ("cancelled", "resource_exhausted").
  std::map<std::pair<std::string, std::string>, int64_t> requests;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  Histogram time_to_first_token;
  Histogram time_per_output_token;
};

// "ok", "cancelled", "invalid_argument", ...: a status as a label value.
std::string OutcomeLabel(const absl::Status& status);

class RequestMetrics {
 public:
  // `model` is the served model's name, or "" when the request never
  // reached one (unknown model, bad request).
  void RecordRequest(const std::string& model, absl::string_view api, const absl::Status& outcome);
  void AddTokens(const std::string& model, int64_t prompt, int64_t generated);
  void ObserveTimeToFirstToken(const std::string& model, absl::Duration d);
  void ObserveTimePerOutputToken(const std::string& model, absl::Duration d);

  // A copy of everything, by model name.
  std::map<std::string, ModelRequestCounters> Snapshot() const;

  // The HTTP face's own counters: responses by (endpoint, status code), and
  // connections opened, refused for being over the limit, and open now.
  struct HttpCounters {
    std::map<std::pair<std::string, int>, int64_t> responses;
    int64_t connections = 0;
    int64_t rejected_connections = 0;
    int64_t open_connections = 0;
  };
  void RecordHttpResponse(absl::string_view endpoint, int status);
  void RecordHttpConnection(bool rejected);
  void HttpConnectionClosed();
  HttpCounters Http() const;

 private:
  ModelRequestCounters& For(const std::string& model) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, ModelRequestCounters> models_ ABSL_GUARDED_BY(mu_);
  HttpCounters http_ ABSL_GUARDED_BY(mu_);
};

// Turns one request's events into observations: the time from `received`
// to its first generated token, the gaps between generated tokens, its
// token counts, and its outcome. Not thread-safe: a sink calls it from the
// scheduler thread (and Finish once, last). `metrics` may be null (then it
// records nothing).
class RequestRecorder {
 public:
  // `model` is "" until the request is known to name a served model: a
  // client cannot grow the label set by asking for made-up names.
  RequestRecorder(RequestMetrics* metrics, std::string api, std::string model, absl::Time received);

  // The model that serves the request, once resolved (before it runs).
  void set_model(std::string model) { model_ = std::move(model); }

  void OnEvent(const v1::GenerateEvent& event, absl::Time now);
  // Records the outcome and the token counts; later calls do nothing.
  void OnFinish(const absl::Status& status);

 private:
  RequestMetrics* metrics_;
  std::string api_;
  std::string model_;
  absl::Time received_;
  absl::Time last_token_ = absl::InfinitePast();
  int64_t prompt_tokens_ = 0;
  int64_t generated_ = 0;
  bool finished_ = false;
};

}  // namespace waste::metrics

#endif  // WASTE_DAEMON_METRICS_REQUEST_METRICS_H_
