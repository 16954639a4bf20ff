#include "daemon/text/utf8.h"

#include <array>

namespace waste::text {
namespace {

bool IsContinuation(uint8_t b) { return (b & 0xC0) == 0x80; }

struct Gpt2Tables {
  std::array<std::string, 256> byte_to_char;
  // Code points used by the mapping are all below 0x144.
  std::array<int16_t, 0x200> char_to_byte;

  Gpt2Tables() {
    char_to_byte.fill(-1);
    // Printable Latin-1 bytes map to themselves; the other 68 bytes take
    // U+0100 onwards, in byte order.
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const uint32_t cp = printable ? b : 256 + next++;
      AppendUtf8(cp, &byte_to_char[b]);
      char_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const Gpt2Tables& Tables() {
  static const Gpt2Tables* tables = new Gpt2Tables();
  return *tables;
}

}  // namespace

uint32_t DecodeUtf8(std::string_view text, size_t* pos) {
  const size_t i = *pos;
  const uint8_t b0 = static_cast<uint8_t>(text[i]);
  if (b0 < 0x80) {
    *pos = i + 1;
    return b0;
  }
  size_t len;
  uint32_t cp;
  uint32_t min;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    *pos = i + 1;
    return kReplacementChar;
  }
  if (i + len > text.size()) {
    *pos = i + 1;
    return kReplacementChar;
  }
  for (size_t k = 1; k < len; ++k) {
    const uint8_t b = static_cast<uint8_t>(text[i + k]);
    if (!IsContinuation(b)) {
      *pos = i + 1;
      return kReplacementChar;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    *pos = i + 1;
    return kReplacementChar;
  }
  *pos = i + len;
  return cp;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string SanitizeUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    const uint32_t cp = DecodeUtf8(text, &pos);
    if (cp == kReplacementChar && pos == start + 1 && static_cast<uint8_t>(text[start]) >= 0x80) {
      AppendUtf8(kReplacementChar, &out);
    } else {
      out.append(text.substr(start, pos - start));
    }
  }
  return out;
}

size_t IncompleteUtf8Suffix(std::string_view text) {
  // Look back over at most 3 bytes for the lead byte of the last sequence.
  const size_t n = text.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const uint8_t b = static_cast<uint8_t>(text[n - back]);
    if (IsContinuation(b)) continue;
    if (b < 0xC0) return 0;  // ASCII ends a sequence.
    size_t need;
    if ((b & 0xE0) == 0xC0) {
      need = 2;
    } else if ((b & 0xF0) == 0xE0) {
      need = 3;
    } else if ((b & 0xF8) == 0xF0) {
      need = 4;
    } else {
      return 0;  // Invalid lead: nothing to wait for.
    }
    return back < need ? back : 0;
  }
  return 0;
}

std::string_view ByteToGpt2Char(uint8_t byte) { return Tables().byte_to_char[byte]; }

int Gpt2CharToByte(uint32_t cp) {
  if (cp >= Tables().char_to_byte.size()) return -1;
  return Tables().char_to_byte[cp];
}

}  // namespace waste::text
