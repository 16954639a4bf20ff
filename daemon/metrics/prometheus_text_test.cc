#include "daemon/metrics/prometheus_text.h"

#include <limits>

#include "gtest/gtest.h"

namespace waste::metrics {
namespace {

TEST(PrometheusTextTest, FamiliesSamplesAndEscaping) {
  PrometheusText out;
  out.Family("waste_requests_total", "counter", "Requests.\nBy model.");
  out.Sample("waste_requests_total", {{"model", "a\"b\\c"}, {"outcome", "ok"}}, 3);
  out.Family("waste_up", "gauge", "Up.");
  out.Sample("waste_up", {}, 1);
  EXPECT_EQ(out.Take(),
            "# HELP waste_requests_total Requests.\\nBy model.\n"
            "# TYPE waste_requests_total counter\n"
            "waste_requests_total{model=\"a\\\"b\\\\c\",outcome=\"ok\"} 3\n"
            "# HELP waste_up Up.\n"
            "# TYPE waste_up gauge\n"
            "waste_up 1\n");
}

TEST(PrometheusTextTest, HistogramBucketsAreCumulativeWithInf) {
  Histogram h({0.5, 1});
  h.Observe(0.25);
  h.Observe(0.75);
  h.Observe(3);
  PrometheusText out;
  out.HistogramSamples("x_seconds", {{"model", "m"}}, h);
  EXPECT_EQ(out.Take(),
            "x_seconds_bucket{model=\"m\",le=\"0.5\"} 1\n"
            "x_seconds_bucket{model=\"m\",le=\"1\"} 2\n"
            "x_seconds_bucket{model=\"m\",le=\"+Inf\"} 3\n"
            "x_seconds_sum{model=\"m\"} 4\n"
            "x_seconds_count{model=\"m\"} 3\n");
}

TEST(PrometheusTextTest, SampleValues) {
  EXPECT_EQ(FormatSampleValue(0), "0");
  EXPECT_EQ(FormatSampleValue(123456789012), "123456789012");
  EXPECT_EQ(FormatSampleValue(0.25), "0.25");
  EXPECT_EQ(FormatSampleValue(0.1), "0.1");
  EXPECT_EQ(FormatSampleValue(1.0 / 3), "0.33333333333333331");
  EXPECT_EQ(FormatSampleValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatSampleValue(std::nan("")), "NaN");
}

}  // namespace
}  // namespace waste::metrics
