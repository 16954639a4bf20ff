#include "daemon/text/utf8.h"

#include <string>

#include "gtest/gtest.h"

namespace waste::text {
namespace {

TEST(Utf8Test, DecodesValidAndReplacesMalformed) {
  const std::string text = "a\xC3\xA9\xE2\x96\x81\xF0\x9F\xA6\x99";
  size_t pos = 0;
  EXPECT_EQ(DecodeUtf8(text, &pos), 'a');
  EXPECT_EQ(DecodeUtf8(text, &pos), 0xE9u);
  EXPECT_EQ(DecodeUtf8(text, &pos), 0x2581u);
  EXPECT_EQ(DecodeUtf8(text, &pos), 0x1F999u);
  EXPECT_EQ(pos, text.size());

  const std::string bad = "\x80\xC3(\xED\xA0\x80\xC0\xAF";
  pos = 0;
  EXPECT_EQ(DecodeUtf8(bad, &pos), kReplacementChar);
  EXPECT_EQ(pos, 1u);
  EXPECT_EQ(DecodeUtf8(bad, &pos), kReplacementChar);  // Lead without continuation.
  EXPECT_EQ(DecodeUtf8(bad, &pos), '(');
  EXPECT_EQ(DecodeUtf8(bad, &pos), kReplacementChar);  // Surrogate.
}

TEST(Utf8Test, EncodesRoundTrip) {
  for (uint32_t cp : {0x41u, 0xE9u, 0x2581u, 0x1F999u, 0x10FFFFu}) {
    std::string s;
    AppendUtf8(cp, &s);
    size_t pos = 0;
    EXPECT_EQ(DecodeUtf8(s, &pos), cp);
    EXPECT_EQ(pos, s.size());
  }
}

TEST(Utf8Test, SanitizeReplacesOnlyBadBytes) {
  EXPECT_EQ(SanitizeUtf8("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(SanitizeUtf8("a\xFF"
                         "b"),
            "a\xEF\xBF\xBD"
            "b");
}

TEST(Utf8Test, IncompleteSuffix) {
  EXPECT_EQ(IncompleteUtf8Suffix(""), 0u);
  EXPECT_EQ(IncompleteUtf8Suffix("abc"), 0u);
  EXPECT_EQ(IncompleteUtf8Suffix("a\xC3"), 1u);
  EXPECT_EQ(IncompleteUtf8Suffix("a\xC3\xA9"), 0u);
  EXPECT_EQ(IncompleteUtf8Suffix("\xF0\x9F\xA6"), 3u);
  EXPECT_EQ(IncompleteUtf8Suffix("\xF0\x9F\xA6\x99"), 0u);
  EXPECT_EQ(IncompleteUtf8Suffix("x\x80"), 0u);  // Stray continuation: nothing to wait for.
}

TEST(Utf8Test, Gpt2ByteMapping) {
  EXPECT_EQ(ByteToGpt2Char('A'), "A");
  EXPECT_EQ(ByteToGpt2Char(' '), "\xC4\xA0");   // U+0120 'Ġ'
  EXPECT_EQ(ByteToGpt2Char('\n'), "\xC4\x8A");  // U+010A 'Ċ'
  for (int b = 0; b < 256; ++b) {
    const std::string_view s = ByteToGpt2Char(static_cast<uint8_t>(b));
    size_t pos = 0;
    EXPECT_EQ(Gpt2CharToByte(DecodeUtf8(s, &pos)), b);
  }
  EXPECT_EQ(Gpt2CharToByte(0x2581), -1);
}

}  // namespace
}  // namespace waste::text
