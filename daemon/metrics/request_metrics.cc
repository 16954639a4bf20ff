#include "daemon/metrics/request_metrics.h"

#include <algorithm>

#include "absl/strings/ascii.h"

namespace waste::metrics {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void Histogram::Observe(double value) {
  const size_t bucket = std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
  ++counts[bucket];
  sum += value;
  ++count;
}

const std::vector<double>& TimeToFirstTokenBuckets() {
  static const std::vector<double> kBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                               1,     2.5,  5,     10,   30,  60};
  return kBuckets;
}

const std::vector<double>& TimePerOutputTokenBuckets() {
  static const std::vector<double> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                               0.05,   0.1,   0.25,   0.5,   1,    2.5};
  return kBuckets;
}

ModelRequestCounters::ModelRequestCounters()
    : time_to_first_token(TimeToFirstTokenBuckets()),
      time_per_output_token(TimePerOutputTokenBuckets()) {}

std::string OutcomeLabel(const absl::Status& status) {
  if (status.ok()) return "ok";
  return absl::AsciiStrToLower(absl::StatusCodeToString(status.code()));
}

ModelRequestCounters& RequestMetrics::For(const std::string& model) { return models_[model]; }

void RequestMetrics::RecordRequest(const std::string& model, absl::string_view api,
                                   const absl::Status& outcome) {
  absl::MutexLock lock(&mu_);
  ++For(model).requests[{std::string(api), OutcomeLabel(outcome)}];
}

void RequestMetrics::AddTokens(const std::string& model, int64_t prompt, int64_t generated) {
  absl::MutexLock lock(&mu_);
  ModelRequestCounters& counters = For(model);
  counters.prompt_tokens += prompt;
  counters.generated_tokens += generated;
}

void RequestMetrics::ObserveTimeToFirstToken(const std::string& model, absl::Duration d) {
  absl::MutexLock lock(&mu_);
  For(model).time_to_first_token.Observe(absl::ToDoubleSeconds(d));
}

void RequestMetrics::ObserveTimePerOutputToken(const std::string& model, absl::Duration d) {
  absl::MutexLock lock(&mu_);
  For(model).time_per_output_token.Observe(absl::ToDoubleSeconds(d));
}

std::map<std::string, ModelRequestCounters> RequestMetrics::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return models_;
}

void RequestMetrics::RecordHttpResponse(absl::string_view endpoint, int status) {
  absl::MutexLock lock(&mu_);
  ++http_.responses[{std::string(endpoint), status}];
}

void RequestMetrics::RecordHttpConnection(bool rejected) {
  absl::MutexLock lock(&mu_);
  ++http_.connections;
  if (rejected) ++http_.rejected_connections;
  ++http_.open_connections;
}

void RequestMetrics::HttpConnectionClosed() {
  absl::MutexLock lock(&mu_);
  --http_.open_connections;
}

RequestMetrics::HttpCounters RequestMetrics::Http() const {
  absl::MutexLock lock(&mu_);
  return http_;
}

RequestRecorder::RequestRecorder(RequestMetrics* metrics, std::string api, std::string model,
                                 absl::Time received)
    : metrics_(metrics), api_(std::move(api)), model_(std::move(model)), received_(received) {}

void RequestRecorder::OnEvent(const v1::GenerateEvent& event, absl::Time now) {
  if (metrics_ == nullptr) return;
  if (event.has_started()) {
    model_ = event.started().model();
    prompt_tokens_ = event.started().prompt_tokens();
    return;
  }
  // Echoed prompt tokens and the final text-only event (id -1) are not
  // generated tokens.
  if (!event.has_token() || event.token().prompt() || event.token().id() < 0) return;
  ++generated_;
  if (last_token_ == absl::InfinitePast()) {
    metrics_->ObserveTimeToFirstToken(model_, now - received_);
  } else {
    metrics_->ObserveTimePerOutputToken(model_, now - last_token_);
  }
  last_token_ = now;
}

void RequestRecorder::OnFinish(const absl::Status& status) {
  if (metrics_ == nullptr || finished_) return;
  finished_ = true;
  metrics_->RecordRequest(model_, api_, status);
  if (prompt_tokens_ > 0 || generated_ > 0) metrics_->AddTokens(model_, prompt_tokens_, generated_);
}

}  // namespace waste::metrics
