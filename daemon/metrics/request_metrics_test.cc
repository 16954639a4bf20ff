#include "daemon/metrics/request_metrics.h"

#include "gtest/gtest.h"

namespace waste::metrics {
namespace {

TEST(HistogramTest, CountsInTheFirstBucketNotBelowTheValue) {
  Histogram h({0.1, 1});
  h.Observe(0.05);
  h.Observe(0.1);  // Upper bounds are inclusive.
  h.Observe(0.5);
  h.Observe(7);
  EXPECT_EQ(h.counts, (std::vector<uint64_t>{2, 1, 1}));
  EXPECT_EQ(h.count, 4u);
  EXPECT_DOUBLE_EQ(h.sum, 7.65);
}

TEST(RequestRecorderTest, RecordsFirstTokenGapsTokensAndOutcome) {
  RequestMetrics metrics;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  RequestRecorder recorder(&metrics, "http", "asked-for", t0);
  v1::GenerateEvent started;
  started.mutable_started()->set_model("m");
  started.mutable_started()->set_prompt_tokens(7);
  recorder.OnEvent(started, t0);
  v1::GenerateEvent token;
  token.mutable_token()->set_id(5);
  recorder.OnEvent(token, t0 + absl::Milliseconds(200));
  recorder.OnEvent(token, t0 + absl::Milliseconds(210));
  recorder.OnEvent(token, t0 + absl::Milliseconds(230));
  v1::GenerateEvent tail;  // The final text-only event is not a token.
  tail.mutable_token()->set_id(-1);
  recorder.OnEvent(tail, t0 + absl::Milliseconds(240));
  recorder.OnFinish(absl::CancelledError("gone"));
  recorder.OnFinish(absl::OkStatus());  // Only the first counts.

  auto snapshot = metrics.Snapshot();
  ASSERT_EQ(snapshot.count("m"), 1u);
  const ModelRequestCounters& m = snapshot.at("m");
  EXPECT_EQ(m.prompt_tokens, 7);
  EXPECT_EQ(m.generated_tokens, 3);
  EXPECT_EQ(m.time_to_first_token.count, 1u);
  EXPECT_NEAR(m.time_to_first_token.sum, 0.2, 1e-9);
  EXPECT_EQ(m.time_per_output_token.count, 2u);
  EXPECT_NEAR(m.time_per_output_token.sum, 0.03, 1e-9);
  EXPECT_EQ(m.requests.size(), 1u);
  EXPECT_EQ((m.requests.at({"http", "cancelled"})), 1);
}

TEST(RequestRecorderTest, AFailureBeforeStartCountsUnderTheRequestedName) {
  RequestMetrics metrics;
  RequestRecorder recorder(&metrics, "grpc", "", absl::Now());
  recorder.OnFinish(absl::ResourceExhaustedError("queue full"));
  auto snapshot = metrics.Snapshot();
  EXPECT_EQ((snapshot.at("").requests.at({"grpc", "resource_exhausted"})), 1);
  EXPECT_EQ(OutcomeLabel(absl::OkStatus()), "ok");
}

TEST(RequestRecorderTest, NullMetricsRecordsNothing) {
  RequestRecorder recorder(nullptr, "grpc", "m", absl::Now());
  v1::GenerateEvent token;
  token.mutable_token()->set_id(1);
  recorder.OnEvent(token, absl::Now());
  recorder.OnFinish(absl::OkStatus());
}

}  // namespace
}  // namespace waste::metrics
