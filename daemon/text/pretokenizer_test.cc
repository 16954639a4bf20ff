#include "daemon/text/pretokenizer.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace waste::text {
namespace {

std::vector<std::string> Split(std::string_view pre, std::string_view text) {
  auto regexes = PreTokenizer::RegexesFor(pre);
  EXPECT_TRUE(regexes.ok()) << regexes.status();
  auto pre_tokenizer = PreTokenizer::Create(*regexes);
  EXPECT_TRUE(pre_tokenizer.ok()) << pre_tokenizer.status();
  std::vector<std::string_view> pieces;
  (*pre_tokenizer)->Split(text, &pieces);
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizerTest, Gpt2) {
  EXPECT_EQ(Split("gpt-2", "Hello world's   3x!!"),
            (Pieces{"Hello", " world", "'s", "  ", " 3", "x", "!!"}));
  EXPECT_EQ(Split("gpt-2", "a  \n"), (Pieces{"a", "  \n"}));
  EXPECT_EQ(Split("gpt-2", "\tHi"), (Pieces{"\t", "Hi"}));
  EXPECT_TRUE(Split("gpt-2", "").empty());
}

TEST(PreTokenizerTest, Llama3GroupsDigitsByThree) {
  EXPECT_EQ(Split("llama-bpe", "12345 ok\n\n"), (Pieces{"123", "45", " ok", "\n\n"}));
  EXPECT_EQ(Split("llama-bpe", "I'M here"), (Pieces{"I", "'M", " here"}));
}

TEST(PreTokenizerTest, UnicodeClasses) {
  // \p{L} covers non-Latin letters; \p{N} non-ASCII digits.
  EXPECT_EQ(Split("gpt-2", "нещо на"), (Pieces{"нещо", " на"}));
  EXPECT_EQ(Split("qwen2",
                  "a\xD9\xA3"
                  "b"),
            (Pieces{"a", "\xD9\xA3", "b"}));
}

TEST(PreTokenizerTest, MultiRegexKeepsGaps) {
  // Falcon first splits punctuation runs, then applies the GPT-2 regex.
  EXPECT_EQ(Split("falcon", "a, b"), (Pieces{"a", ",", " b"}));
  // Deepseek-coder: every digit alone, newlines alone.
  EXPECT_EQ(Split("deepseek-coder", "x12\n"), (Pieces{"x", "1", "2", "\n"}));
}

TEST(PreTokenizerTest, DollarMeansEndOfPiece) {
  // deepseek-llm's \s+$ must not match before a trailing newline.
  const Pieces pieces = Split("deepseek-llm", "a  \nb");
  std::string joined;
  for (const auto& p : pieces) joined += p;
  EXPECT_EQ(joined, "a  \nb");
}

// Goldens from Moonshot's pattern itself (tokenization_kimi.py's pat_str,
// run by Python's `regex` module, which has its class intersections):
// camelCase splits, Han runs stand alone, kana and Hangul are letters.
TEST(PreTokenizerTest, KimiK2AsMoonshotsPattern) {
  EXPECT_EQ(Split("kimi-k2", "getUserName iPhone helloWorld"),
            (Pieces{"get", "User", "Name", " i", "Phone", " hello", "World"}));
  EXPECT_EQ(Split("kimi-k2", "Hello World! It's 12345 o'clock, WE'RE HERE."),
            (Pieces{"Hello", " World", "!", " It's", " ", "123", "45", " o", "'clock", ",",
                    " WE'RE", " HERE", "."}));
  EXPECT_EQ(Split("kimi-k2", "中文abc混合English文本123"),
            (Pieces{"中文", "abc", "混合", "English", "文本", "123"}));
  EXPECT_EQ(Split("kimi-k2", "  leading spaces\n\n\ttabs\r\nand   trailing   "),
            (Pieces{" ", " leading", " spaces", "\n\n", "\ttabs", "\r\n", "and", "  ", " trailing",
                    "   "}));
  EXPECT_EQ(Split("kimi-k2", "日本語のテキストとカタカナ"),
            (Pieces{"日本語", "のテキストとカタカナ"}));
  EXPECT_EQ(Split("kimi-k2", "Ünïcödé façade naïve ΑΘΗΝΑ Москва"),
            (Pieces{"Ünïcödé", " façade", " naïve", " ΑΘΗΝΑ", " Москва"}));
  EXPECT_EQ(Split("kimi-k2", "x=foo(bar[1]);// comment\n"),
            (Pieces{"x", "=foo", "(bar", "[", "1", "]);//", " comment", "\n"}));
  EXPECT_EQ(Split("kimi-k2", "I'M fine, you'LL see"),
            (Pieces{"I'M", " fine", ",", " you'LL", " see"}));
  EXPECT_EQ(Split("kimi-k2", "한국어 텍스트"), (Pieces{"한국어", " 텍스트"}));
}

TEST(PreTokenizerTest, UnknownNameAndBadRegex) {
  EXPECT_EQ(PreTokenizer::RegexesFor("no-such-pre").status().code(), absl::StatusCode::kNotFound);
  auto bad = PreTokenizer::Create({"(unclosed"});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace waste::text
