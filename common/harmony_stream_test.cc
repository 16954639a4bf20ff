#include "common/harmony_stream.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace waste {
namespace {

constexpr char kReply[] =
    "<|channel|>analysis<|message|>User asks 2+2. Answer 4.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>It is 4.";

// Feeds `pieces` in turn; returns everything handed back, and checks that
// nothing of the markup leaks.
HarmonySplitter::Parts Feed(const std::vector<std::string>& pieces) {
  HarmonySplitter s;
  HarmonySplitter::Parts all;
  auto take = [&all](HarmonySplitter::Parts p) {
    all.reasoning += p.reasoning;
    all.content += p.content;
    for (ToolCall& c : p.calls) all.calls.push_back(std::move(c));
  };
  for (const std::string& piece : pieces) take(s.Add(piece));
  take(s.Finish());
  return all;
}

TEST(HarmonySplitterTest, SplitsAnalysisFromFinal) {
  const HarmonySplitter::Parts whole = Feed({kReply});
  EXPECT_EQ(whole.reasoning, "User asks 2+2. Answer 4.");
  EXPECT_EQ(whole.content, "It is 4.");
}

// Whatever the cuts (a byte at a time included), the same parts, and text
// is handed back as soon as it cannot be a marker.
TEST(HarmonySplitterTest, AnyCutsGiveTheSameParts) {
  const std::string reply = kReply;
  for (size_t step : {1, 2, 3, 5, 7, 11}) {
    std::vector<std::string> pieces;
    for (size_t i = 0; i < reply.size(); i += step) pieces.push_back(reply.substr(i, step));
    const HarmonySplitter::Parts parts = Feed(pieces);
    EXPECT_EQ(parts.reasoning, "User asks 2+2. Answer 4.") << step;
    EXPECT_EQ(parts.content, "It is 4.") << step;
  }
  HarmonySplitter s;
  s.Add("<|channel|>final<|message|>");
  EXPECT_EQ(s.Add("Hello <|e").content, "Hello ");  // "<|e" may start <|end|>.
  EXPECT_EQ(s.Add("x").content, "<|ex");            // It did not.
}

// A tool call: commentary with a recipient and a constraint; its body is
// content. A reply cut inside a message keeps what it had.
// A message to a function is a call of it, its body the arguments, handed
// back whole when the reply ends (at its <|call|>) or the message does; the
// recipient may come before the channel or after it.
TEST(HarmonySplitterTest, CallsAndCutReplies) {
  const HarmonySplitter::Parts call =
      Feed({"<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>",
            "commentary to=functions.get_weather <|constrain|>json<|message|>",
            " {\"city\":\"Paris\"}"});
  EXPECT_EQ(call.reasoning, "Need weather.");
  EXPECT_EQ(call.content, "");
  ASSERT_EQ(call.calls.size(), 1u);
  EXPECT_EQ(call.calls[0].id, "");
  EXPECT_EQ(call.calls[0].name, "get_weather");
  EXPECT_EQ(call.calls[0].arguments, "{\"city\":\"Paris\"}");
  const HarmonySplitter::Parts before =
      Feed({"<|start|>assistant to=functions.noop<|channel|>commentary json<|message|>{}<|end|>",
            "<|start|>assistant<|channel|>commentary<|message|>Said."});
  ASSERT_EQ(before.calls.size(), 1u);
  EXPECT_EQ(before.calls[0].name, "noop");
  EXPECT_EQ(before.calls[0].arguments, "{}");
  EXPECT_EQ(before.content, "Said.");
  const HarmonySplitter::Parts cut = Feed({"<|channel|>analysis<|message|>Thinking <|en"});
  EXPECT_EQ(cut.reasoning, "Thinking <|en");
  EXPECT_EQ(Feed({"<|channel|>analy"}).reasoning, "");
}

}  // namespace
}  // namespace waste
