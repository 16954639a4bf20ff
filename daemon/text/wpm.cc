// WordPiece encoding (BERT vocabularies), following llama.cpp's
// llm_tokenizer_wpm: split on whitespace, punctuation and CJK characters,
// lowercase, then greedy longest-match per word with a U+2581 word-start
// marker. The text is first put in canonical decomposition (NFD, by ICU) so
// that accents become combining marks, which BERT strips ("Führer" ->
// "fuhrer"). Unicode categories come from PCRE2 (\p{P}, \p{C}, \p{M}),
// whitespace and lowercasing from glibc's C.UTF-8 locale.
#include <locale.h>
#include <wctype.h>

#include <algorithm>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include "daemon/text/token_lookup.h"
#include "daemon/text/tokenizer.h"
#include "daemon/text/utf8.h"

namespace waste::text {
namespace {

locale_t Utf8Locale() {
  static const locale_t locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
  return locale;
}

// Whether code point `cp` (as UTF-8 in `utf8`) is in the Unicode general
// category `pattern` names. Compiled once; pcre2_code is shareable.
class CategoryTest {
 public:
  explicit CategoryTest(const char* pattern) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &error, &offset, nullptr);
  }
  bool Matches(std::string_view utf8) const {
    if (code_ == nullptr) return false;
    pcre2_match_data* match = pcre2_match_data_create(1, nullptr);
    const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(utf8.data()), utf8.size(), 0,
                               PCRE2_NO_UTF_CHECK, match, nullptr);
    pcre2_match_data_free(match);
    return rc >= 0;
  }

 private:
  pcre2_code* code_ = nullptr;
};

bool IsChinese(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// `text` in Unicode normalization form D; unchanged if ICU fails (the text
// was sanitized to valid UTF-8 before, so it should not).
std::string Nfd(std::string_view text) {
  UErrorCode error = U_ZERO_ERROR;
  const UNormalizer2* nfd = unorm2_getNFDInstance(&error);
  if (U_FAILURE(error)) return std::string(text);
  std::u16string utf16(text.size() + 1, u'\0');
  int32_t utf16_len = 0;
  u_strFromUTF8(utf16.data(), static_cast<int32_t>(utf16.size()), &utf16_len, text.data(),
                static_cast<int32_t>(text.size()), &error);
  if (U_FAILURE(error)) return std::string(text);
  // Decomposition grows text by at most a small factor (3x covers
  // everything in Unicode's data except a few historic scripts).
  std::u16string decomposed(4 * static_cast<size_t>(utf16_len) + 16, u'\0');
  int32_t decomposed_len = unorm2_normalize(nfd, utf16.data(), utf16_len, decomposed.data(),
                                            static_cast<int32_t>(decomposed.size()), &error);
  if (U_FAILURE(error)) return std::string(text);
  std::string out(4 * static_cast<size_t>(decomposed_len) + 4, '\0');
  int32_t out_len = 0;
  u_strToUTF8(out.data(), static_cast<int32_t>(out.size()), &out_len, decomposed.data(),
              decomposed_len, &error);
  if (U_FAILURE(error)) return std::string(text);
  out.resize(out_len);
  return out;
}

}  // namespace

void Tokenizer::EncodeWordPiece(std::string_view raw_text, std::vector<TokenId>* out) const {
  const std::string normalized = Nfd(raw_text);
  const std::string_view text = normalized;
  const locale_t locale = Utf8Locale();
  static const CategoryTest* const punctuation = new CategoryTest("\\p{P}");
  static const CategoryTest* const control = new CategoryTest("\\p{C}");
  static const CategoryTest* const mark = new CategoryTest("\\p{M}");
  std::vector<std::string> words(1);
  std::string ch;
  for (size_t pos = 0; pos < text.size();) {
    uint32_t cp = DecodeUtf8(text, &pos);
    const bool space = locale ? iswspace_l(cp, locale) : (cp == ' ' || (cp >= 9 && cp <= 13));
    if (space) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    ch.clear();
    AppendUtf8(cp, &ch);
    if (cp == 0 || cp == kReplacementChar || control->Matches(ch)) continue;
    // BERT strips accents together with lowercasing.
    if (lowercase_ && mark->Matches(ch)) continue;
    if (lowercase_ && locale) cp = towlower_l(cp, locale);
    // ASCII symbols ($, +, <, ...) split like punctuation; other symbols
    // (emoji) stay inside their word.
    const bool punct = cp < 0x80 ? (cp > 0x20 && cp < 0x7F && !(cp >= '0' && cp <= '9') &&
                                    !(cp >= 'a' && cp <= 'z') && !(cp >= 'A' && cp <= 'Z'))
                                 : punctuation->Matches(ch);
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
