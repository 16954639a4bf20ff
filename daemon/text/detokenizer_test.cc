#include "daemon/text/detokenizer.h"

#include <string>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

namespace waste::text {
namespace {

// <unk> <s> </s>, byte tokens, and "▁hi".
std::unique_ptr<Tokenizer> MakeTokenizer() {
  Vocab v;
  v.model = TokenizerModel::kSpm;
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.token_types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl};
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(absl::StrFormat("<0x%02X>", b));
    v.token_types.push_back(TokenType::kByte);
  }
  v.tokens.push_back("\xE2\x96\x81hi");
  v.token_types.push_back(TokenType::kNormal);
  auto t = Tokenizer::Create(std::move(v));
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

TokenId Byte(uint8_t b) { return 3 + b; }
constexpr TokenId kHi = 3 + 256;

TEST(StreamingDetokenizerTest, HoldsBackSplitCharacters) {
  auto tokenizer = MakeTokenizer();
  StreamingDetokenizer d(*tokenizer);
  std::string out;
  d.Push(kHi, &out);
  EXPECT_EQ(out, " hi");
  // U+1F999 arrives one byte token at a time.
  d.Push(Byte(0xF0), &out);
  d.Push(Byte(0x9F), &out);
  d.Push(Byte(0xA6), &out);
  EXPECT_EQ(out, " hi");
  EXPECT_EQ(d.pending_bytes(), 3u);
  d.Push(Byte(0x99), &out);
  EXPECT_EQ(out, " hi\xF0\x9F\xA6\x99");
  d.Push(2, &out);  // </s> renders as nothing by default.
  EXPECT_EQ(out, " hi\xF0\x9F\xA6\x99");
}

TEST(StreamingDetokenizerTest, MalformedBytesBecomeReplacementCharacters) {
  auto tokenizer = MakeTokenizer();
  StreamingDetokenizer d(*tokenizer);
  std::string out;
  d.Push(Byte(0x80), &out);  // A stray continuation byte.
  d.Push(Byte('a'), &out);
  d.Push(Byte(0xC3), &out);  // A lead byte followed by ASCII, not a continuation.
  d.Push(Byte('b'), &out);
  d.Push(Byte(0xFF), &out);  // Never valid in UTF-8.
  EXPECT_EQ(out,
            "\xEF\xBF\xBD"
            "a"
            "\xEF\xBF\xBD"
            "b"
            "\xEF\xBF\xBD");
  EXPECT_EQ(d.pending_bytes(), 0u);
}

TEST(StreamingDetokenizerTest, FlushReplacesIncompleteAndStripOption) {
  auto tokenizer = MakeTokenizer();
  StreamingDetokenizer d(*tokenizer, /*unparse_special=*/true, /*strip_leading_space=*/true);
  std::string out;
  d.Push(1, &out);  // "<s>" is the first piece; nothing to strip.
  d.Push(kHi, &out);
  d.Push(Byte(0xC3), &out);
  EXPECT_EQ(out, "<s> hi");
  d.Flush(&out);
  EXPECT_EQ(out, "<s> hi\xEF\xBF\xBD");
  d.Reset();
  out.clear();
  d.Push(kHi, &out);
  EXPECT_EQ(out, "hi");
}

}  // namespace
}  // namespace waste::text
