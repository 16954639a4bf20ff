#include "daemon/http/sse.h"

#include "gtest/gtest.h"

namespace waste::http {
namespace {

TEST(SseTest, EventFraming) {
  EXPECT_EQ(SseEvent(R"({"a":1})"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(SseEvent("two\nlines"), "data: two\ndata: lines\n\n");
  EXPECT_EQ(std::string(kSseDone), "data: [DONE]\n\n");
}

TEST(SseTest, ChunkedFraming) {
  EXPECT_EQ(HttpChunk("hello"), "5\r\nhello\r\n");
  EXPECT_EQ(HttpChunk(std::string(26, 'x')), "1a\r\n" + std::string(26, 'x') + "\r\n");
  EXPECT_EQ(HttpChunk(""), "");  // Never the zero chunk that ends the body.
  EXPECT_EQ(std::string(kLastHttpChunk), "0\r\n\r\n");
}

TEST(SseTest, ParserRoundTripsEventsSplitAnywhere) {
  const std::string stream = SseEvent(R"({"x":"a"})") + ": keep-alive comment\n\n" +
                             SseEvent("multi\nline") + "event: ping\ndata: p\r\n\r\n" + kSseDone;
  // Every split point gives the same events.
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    SseParser parser;
    parser.Feed(stream.substr(0, cut));
    std::vector<std::string> events = parser.TakeEvents();
    parser.Feed(stream.substr(cut));
    for (std::string& e : parser.TakeEvents()) events.push_back(std::move(e));
    ASSERT_EQ(events, (std::vector<std::string>{R"({"x":"a"})", "multi\nline", "p", "[DONE]"}))
        << "cut at " << cut;
  }
}

TEST(SseTest, AnUnfinishedEventIsNotReported) {
  SseParser parser;
  parser.Feed("data: partial\n");
  EXPECT_TRUE(parser.TakeEvents().empty());
  parser.Feed("\n");
  EXPECT_EQ(parser.TakeEvents(), std::vector<std::string>{"partial"});
}

}  // namespace
}  // namespace waste::http
