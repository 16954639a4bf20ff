// Writes the Prometheus text exposition format (version 0.0.4): one HELP
// and TYPE line per metric family, then its samples. Label values are
// escaped; histograms get cumulative `_bucket{le=...}` samples with a +Inf
// bucket, `_sum` and `_count`.
//
//   PrometheusText out;
//   out.Family("waste_requests_total", "counter", "Generate requests finished.");
//   out.Sample("waste_requests_total", {{"model", "m"}, {"outcome", "ok"}}, 3);
//   std::string page = out.Take();
//
// Not thread-safe; one writer per rendering.
#ifndef WASTE_DAEMON_METRICS_PROMETHEUS_TEXT_H_
#define WASTE_DAEMON_METRICS_PROMETHEUS_TEXT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "daemon/metrics/request_metrics.h"

namespace waste::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

// The Content-Type of a page this writer produces.
inline constexpr char kPrometheusContentType[] = "text/plain; version=0.0.4; charset=utf-8";

class PrometheusText {
 public:
  // Starts a family: `type` is "counter", "gauge" or "histogram". Samples
  // of a family must follow its Family call, before the next family.
  void Family(absl::string_view name, absl::string_view type, absl::string_view help);
  // One sample; `name` is the family's name (plus a suffix for histograms).
  void Sample(absl::string_view name, const Labels& labels, double value);
  // All samples of one histogram series.
  void HistogramSamples(absl::string_view name, const Labels& labels, const Histogram& histogram);

  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// A label value with backslash, double quote and newline escaped.
std::string EscapeLabelValue(absl::string_view value);
// A sample value: integers exactly, other numbers with full precision,
// "+Inf", "-Inf", "NaN".
std::string FormatSampleValue(double value);

}  // namespace waste::metrics

#endif  // WASTE_DAEMON_METRICS_PROMETHEUS_TEXT_H_
