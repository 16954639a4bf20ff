// WordPiece encoding (BERT vocabularies), following llama.cpp's
// llm_tokenizer_wpm: split on whitespace, punctuation and CJK characters,
// lowercase, then greedy longest-match per word with a U+2581 word-start
// marker. Character classes and lowercasing come from glibc's C.UTF-8
// locale; accent stripping (NFD) is not implemented, so accented input may
// tokenize differently from llama.cpp.
#include <locale.h>
#include <wctype.h>

#include <algorithm>

#include "daemon/text/token_lookup.h"
#include "daemon/text/tokenizer.h"
#include "daemon/text/utf8.h"

namespace waste::text {
namespace {

locale_t Utf8Locale() {
  static const locale_t locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
  return locale;
}

bool IsChinese(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

}  // namespace

void Tokenizer::EncodeWordPiece(std::string_view text, std::vector<TokenId>* out) const {
  const locale_t locale = Utf8Locale();
  std::vector<std::string> words(1);
  for (size_t pos = 0; pos < text.size();) {
    uint32_t cp = DecodeUtf8(text, &pos);
    const bool space = locale ? iswspace_l(cp, locale) : (cp == ' ' || (cp >= 9 && cp <= 13));
    if (space) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    if (cp == 0 || cp == kReplacementChar || (locale && iswcntrl_l(cp, locale))) continue;
    if (lowercase_ && locale) cp = towlower_l(cp, locale);
    const bool punct = cp < 0x80 ? (cp > 0x20 && cp < 0x7F && !(cp >= '0' && cp <= '9') &&
                                    !(cp >= 'a' && cp <= 'z') && !(cp >= 'A' && cp <= 'Z'))
                                 : (locale && iswpunct_l(cp, locale) && !iswalnum_l(cp, locale));
    if (punct || IsChinese(cp)) {
      if (!words.back().empty()) words.emplace_back();
      AppendUtf8(cp, &words.back());
      words.emplace_back();
    } else {
      AppendUtf8(cp, &words.back());
    }
  }

  const size_t max_len = lookup_->max_token_bytes();
  std::string marked;
  for (const std::string& word : words) {
    if (word.empty()) continue;
    marked.assign("\xE2\x96\x81").append(word);
    const size_t n = marked.size();
    const size_t start_size = out->size();
    for (size_t i = 0; i < n;) {
      bool match = false;
      for (size_t j = std::min(n, i + max_len + 1); j > i; --j) {
        const TokenId id = lookup_->Find(std::string_view(marked).substr(i, j - i));
        if (id != kNoToken) {
          out->push_back(id);
          i = j;
          match = true;
          break;
        }
      }
      if (!match) {
        out->resize(start_size);
        break;
      }
    }
    if (out->size() == start_size && unk_ != kNoToken) out->push_back(unk_);
  }
}

}  // namespace waste::text
