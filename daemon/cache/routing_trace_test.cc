// The expert cache's policy choice, on evidence: on uniform routing every
// policy hits about the cache fraction; on Zipf-skewed routing LFU with
// ageing beats LRU and plain LFU.
#include "daemon/cache/routing_trace.h"

#include <cstdio>

#include "gtest/gtest.h"

namespace waste::cache {
namespace {

constexpr int kLayers = 8, kExperts = 64, kTopK = 6;
constexpr int64_t kTokens = 600, kWarmup = 100;

TEST(RoutingTraceTest, UniformRoutingHitsTheCacheFraction) {
  RoutingTrace trace = ZipfTrace(kLayers, kExperts, kTopK, kTokens, 0.0, 7);
  const int slots = kLayers * kExperts / 4;
  for (PolicyKind kind : {PolicyKind::kLru, PolicyKind::kLfu, PolicyKind::kLfuAged}) {
    const double rate = ReplayTrace(trace, kind, slots, kWarmup).hit_rate();
    EXPECT_NEAR(rate, 0.25, 0.05) << PolicyKindName(kind);
  }
}

TEST(RoutingTraceTest, SkewedRoutingFavoursLfuWithAgeing) {
  RoutingTrace trace = ZipfTrace(kLayers, kExperts, kTopK, kTokens, 1.0, 7);
  for (int quarter : {1, 2}) {
    const int slots = kLayers * kExperts * quarter / 4;
    const double lru = ReplayTrace(trace, PolicyKind::kLru, slots, kWarmup).hit_rate();
    const double lfu = ReplayTrace(trace, PolicyKind::kLfu, slots, kWarmup).hit_rate();
    const double aged = ReplayTrace(trace, PolicyKind::kLfuAged, slots, kWarmup).hit_rate();
    std::printf("zipf 1.0, cache %d%%: lru %.3f lfu %.3f lfu-aged %.3f\n", 25 * quarter, lru, lfu,
                aged);
    EXPECT_GT(aged, lru + 0.03);
    EXPECT_GT(aged, lfu + 0.03);
  }
}

TEST(RoutingTraceTest, TextRoundTrip) {
  RoutingTrace trace = ZipfTrace(2, 8, 2, 5, 1.0, 3);
  auto parsed = ParseTrace(FormatTrace(trace));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->experts, trace.experts);
  EXPECT_EQ(parsed->tokens(), 5);
  EXPECT_FALSE(ParseTrace("routing-trace v2 1 1 1\n").ok());
  EXPECT_FALSE(ParseTrace("routing-trace v1 1 4 1\n9\n").ok());
}

}  // namespace
}  // namespace waste::cache
