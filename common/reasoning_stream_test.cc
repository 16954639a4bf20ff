#include "common/reasoning_stream.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace waste {
namespace {

struct Split {
  ReasoningSplitter::Parts parts;
  bool split = false;
};

// Feeds `reply` in pieces of `step` bytes; returns everything handed back.
Split Feed(const std::string& reply, size_t step) {
  ReasoningSplitter s;
  Split all;
  auto take = [&all](const ReasoningSplitter::Parts& p) {
    all.parts.reasoning += p.reasoning;
    all.parts.content += p.content;
  };
  for (size_t i = 0; i < reply.size(); i += step) take(s.Add(reply.substr(i, step)));
  take(s.Finish());
  all.split = s.split();
  return all;
}

struct Case {
  std::string reply, reasoning, content;
  bool split;
};

// Whatever the cuts (a byte at a time included), the same parts.
TEST(ReasoningSplitterTest, FormsAtAnyCuts) {
  const std::vector<Case> cases = {
      // Qwen3, DeepSeek-R1: the block opens the reply.
      {"<think>\nThe user asks 2+2.\n</think>\n\nIt is 4.", "The user asks 2+2.", "It is 4.", true},
      // GLM-4.5: a newline first.
      {"\n<think>Add them.</think>\n4 ", "Add them.", "4 ", true},
      // Thinking switched off: an empty block.
      {"<think>\n\n</think>\n\nHi", "", "Hi", true},
      // Inner whitespace of the reasoning stays.
      {"<think>a\n\nb  c</think>d", "a\n\nb  c", "d", true},
      // gpt-oss's harmony goes through its own splitter.
      {"<|channel|>analysis<|message|>R<|end|><|start|>assistant<|channel|>final<|message|>C", "R",
       "C", true},
      // Not a reasoning form: untouched, whitespace and all.
      {" Hello <think>x</think>", "", " Hello <think>x</think>", false},
      {"<b>bold</b>", "", "<b>bold</b>", false},
      {"\n\n", "", "\n\n", false},
      {"<thi", "", "<thi", false},
      // Cut short inside the block: what it had is reasoning.
      {"<think>half a thought  \n", "half a thought", "", true},
  };
  for (const Case& c : cases) {
    for (size_t step : {1, 2, 3, 5, 7, 64}) {
      const Split got = Feed(c.reply, step);
      EXPECT_EQ(got.parts.reasoning, c.reasoning) << c.reply << " step " << step;
      EXPECT_EQ(got.parts.content, c.content) << c.reply << " step " << step;
      EXPECT_EQ(got.split, c.split) << c.reply;
    }
  }
}

// DeepSeek-V3.1 asked to think: the prompt opened the block, the reply only
// closes it.
TEST(ReasoningSplitterTest, ReplyInsideAnOpenBlock) {
  const std::string reply = "Add them.\n</think>\n\n4";
  for (size_t step : {1, 2, 3, 64}) {
    ReasoningSplitter s(/*opened=*/true);
    ReasoningSplitter::Parts all;
    for (size_t i = 0; i < reply.size(); i += step) {
      const ReasoningSplitter::Parts p = s.Add(reply.substr(i, step));
      all.reasoning += p.reasoning;
      all.content += p.content;
    }
    const ReasoningSplitter::Parts end = s.Finish();
    EXPECT_EQ(all.reasoning + end.reasoning, "Add them.") << step;
    EXPECT_EQ(all.content + end.content, "4") << step;
    EXPECT_TRUE(s.split());
  }
}

// Text is handed back as soon as it cannot be markup or whitespace to drop.
TEST(ReasoningSplitterTest, HandsBackAsSoonAsKnown) {
  ReasoningSplitter s;
  EXPECT_EQ(s.Add("\n").content, "");  // May still open a block.
  EXPECT_EQ(s.Add("<thi").content, "");
  EXPECT_EQ(s.Add("nk>ab").reasoning, "ab");
  EXPECT_EQ(s.Add("c </").reasoning, "c");  // " </" may end the block.
  EXPECT_EQ(s.Add("x").reasoning, " </x");  // It did not.
  const ReasoningSplitter::Parts end = s.Add("</think>\n\nAn");
  EXPECT_EQ(end.reasoning, "");
  EXPECT_EQ(end.content, "An");
  EXPECT_EQ(s.Add("swer").content, "swer");

  ReasoningSplitter plain;
  EXPECT_EQ(plain.Add("Hi").content, "Hi");  // Decided at once.
  EXPECT_FALSE(plain.split());
}

}  // namespace
}  // namespace waste
