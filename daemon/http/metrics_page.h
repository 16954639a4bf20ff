// GET /metrics: the Prometheus page. Request counters and latency
// histograms come from the faces' RequestMetrics; cache, disk, memory,
// queue and batch numbers from each loaded model's counters, read at
// render time. Names carry the `waste_` prefix and their unit (`_seconds`,
// `_bytes`, `_total` for counters); labels are `model` and a few fixed
// sets, never client-chosen text.
#ifndef WASTE_DAEMON_HTTP_METRICS_PAGE_H_
#define WASTE_DAEMON_HTTP_METRICS_PAGE_H_

#include <string>

#include "absl/time/time.h"
#include "daemon/engine/engine.h"
#include "daemon/metrics/request_metrics.h"

namespace waste::http {

// Renders the page. Reads every loaded model's stats and scans the models
// directories: call it off the I/O threads. `metrics` may be null.
std::string RenderMetricsPage(engine::Engine& engine, const metrics::RequestMetrics* metrics,
                              absl::Time started);

}  // namespace waste::http

#endif  // WASTE_DAEMON_HTTP_METRICS_PAGE_H_
