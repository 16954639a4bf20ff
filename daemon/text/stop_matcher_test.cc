#include "daemon/text/stop_matcher.h"

#include "gtest/gtest.h"

namespace waste::text {
namespace {

TEST(StopMatcherTest, PassesThroughWithoutStops) {
  StopMatcher m({});
  std::string out;
  EXPECT_FALSE(m.Push("hello", &out));
  EXPECT_EQ(out, "hello");
}

TEST(StopMatcherTest, StopSpreadOverChunks) {
  StopMatcher m({"</end>"});
  std::string out;
  EXPECT_FALSE(m.Push("abc</", &out));
  EXPECT_EQ(out, "abc");  // "</" might start the stop string.
  EXPECT_EQ(m.held_bytes(), 2u);
  EXPECT_FALSE(m.Push("e", &out));
  EXPECT_EQ(out, "abc");
  EXPECT_TRUE(m.Push("nd>tail", &out));
  EXPECT_EQ(out, "abc");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched_index(), 0);
  EXPECT_TRUE(m.Push("more", &out));
  EXPECT_EQ(out, "abc");
}

TEST(StopMatcherTest, ReleasesFalseStart) {
  StopMatcher m({"STOP"});
  std::string out;
  EXPECT_FALSE(m.Push("ST", &out));
  EXPECT_EQ(out, "");
  EXPECT_FALSE(m.Push("ay", &out));
  EXPECT_EQ(out, "STay");
  EXPECT_FALSE(m.Push(" S", &out));
  EXPECT_EQ(out, "STay ");
  m.Flush(&out);
  EXPECT_EQ(out, "STay S");
}

TEST(StopMatcherTest, EarliestOfSeveral) {
  StopMatcher m({"", "world", "o w"});
  std::string out;
  EXPECT_TRUE(m.Push("hello world", &out));
  EXPECT_EQ(out, "hell");
  EXPECT_EQ(m.matched_index(), 2);
}

TEST(StopMatcherTest, OverlappingPrefixes) {
  // "aab" inside "aaab": the held tail must keep the right candidate.
  StopMatcher m({"aab"});
  std::string out;
  EXPECT_FALSE(m.Push("a", &out));
  EXPECT_FALSE(m.Push("a", &out));
  EXPECT_FALSE(m.Push("a", &out));
  EXPECT_EQ(out, "a");
  EXPECT_TRUE(m.Push("b", &out));
  EXPECT_EQ(out, "a");
}

TEST(StopMatcherTest, ResetStartsOver) {
  StopMatcher m({"x"});
  std::string out;
  EXPECT_TRUE(m.Push("ax", &out));
  m.Reset();
  out.clear();
  EXPECT_FALSE(m.Push("bb", &out));
  EXPECT_EQ(out, "bb");
}

}  // namespace
}  // namespace waste::text
