// UTF-8 helpers shared by the tokenizers and detokenizers, and GPT-2's
// byte-to-unicode mapping (byte-level BPE spells every byte as one printable
// code point so that merges never see raw control or partial bytes).
#ifndef WASTE_DAEMON_TEXT_UTF8_H_
#define WASTE_DAEMON_TEXT_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace waste::text {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Length of the UTF-8 sequence a lead byte announces, judged from its high
// nibble only (as llama.cpp does): 1 for ASCII and for stray continuation
// bytes, 2, 3 or 4 otherwise.
inline size_t Utf8SeqLen(char lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[static_cast<uint8_t>(lead) >> 4];
}

// Decodes one code point at text[*pos] and advances *pos. Malformed input
// (bad lead or continuation byte, truncation, overlong form, surrogate,
// > U+10FFFF) yields kReplacementChar and advances by one byte.
uint32_t DecodeUtf8(std::string_view text, size_t* pos);

// Appends the UTF-8 encoding of `cp` (must be <= U+10FFFF).
void AppendUtf8(uint32_t cp, std::string* out);

// `text` with every malformed byte replaced by U+FFFD, so that the regex
// engine only sees valid UTF-8. Returns `text` unchanged when it is valid.
std::string SanitizeUtf8(std::string_view text);

// Number of trailing bytes of `text` that form the start of a valid UTF-8
// sequence still waiting for continuation bytes (0..3). A streaming decoder
// holds those back until the rest arrives.
size_t IncompleteUtf8Suffix(std::string_view text);

// GPT-2 byte-level mapping: byte -> its code point, as UTF-8 text (1 or 2
// bytes).
std::string_view ByteToGpt2Char(uint8_t byte);
// Inverse: code point -> byte, or -1 when `cp` is not in the mapping.
int Gpt2CharToByte(uint32_t cp);

}  // namespace waste::text

#endif  // WASTE_DAEMON_TEXT_UTF8_H_
