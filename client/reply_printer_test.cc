#include "client/reply_printer.h"

#include <sstream>

#include "gtest/gtest.h"

namespace waste {
namespace {

// A harmony reply: reasoning, a blank line, the answer; dimmed on a
// terminal; the conversation keeps the answer only.
TEST(ReplyPrinterTest, HarmonyShowsReasoningThenAnswer) {
  for (bool terminal : {false, true}) {
    std::ostringstream out;
    ReplyPrinter printer(out, terminal);
    for (const char* piece :
         {"<|channel|>", "analysis", "<|message|>", "Add.", "<|end|>", "<|start|>", "assistant",
          "<|channel|>", "final", "<|message|>", "4", "."}) {
      printer.Add(piece);
    }
    printer.Finish();
    EXPECT_EQ(out.str(), terminal ? "\x1b[2mAdd.\x1b[0m\n\n4." : "Add.\n\n4.");
    EXPECT_EQ(printer.answer(), "4.");
  }
}

// Qwen3 / DeepSeek-R1 / GLM-4.5: a <think> block, shown the same way.
TEST(ReplyPrinterTest, ThinkBlockShowsReasoningThenAnswer) {
  std::ostringstream out;
  ReplyPrinter printer(out, false);
  for (const char* piece : {"\n", "<think>", "\nAdd", " them.\n", "</think>", "\n\n", "4."}) {
    printer.Add(piece);
  }
  printer.Finish();
  EXPECT_EQ(out.str(), "Add them.\n\n4.");
  EXPECT_EQ(printer.answer(), "4.");
}

TEST(ReplyPrinterTest, OtherRepliesPrintAsTheyCome) {
  std::ostringstream out;
  ReplyPrinter printer(out, true);
  printer.Add("");
  printer.Add("Hello <|channel|>");
  printer.Add(" world");
  printer.Finish();
  EXPECT_EQ(out.str(), "Hello <|channel|> world");
  EXPECT_EQ(printer.answer(), "Hello <|channel|> world");
}

}  // namespace
}  // namespace waste
