// Regex pre-tokenizer for byte-level BPE: splits text into the "words" that
// BPE merges never cross, with the regexes llama.cpp assigns to each
// tokenizer.ggml.pre name.
//
// As in llama.cpp, a pre-tokenizer is a list of regexes applied in turn: each
// one splits every current piece into its matches and the unmatched gaps
// between them (gaps are kept as pieces of their own), so no text is ever
// lost. Matching uses PCRE2 in UTF + UCP mode (\p{L}, \p{N}, \s are Unicode
// aware; lookahead such as \s+(?!\S) works), with $ matching only at the end
// of a piece, as std::regex does.
//
// A PreTokenizer is immutable after creation and safe to share between
// threads.
#ifndef WASTE_DAEMON_TEXT_PRETOKENIZER_H_
#define WASTE_DAEMON_TEXT_PRETOKENIZER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace waste::text {

class PreTokenizer {
 public:
  // The regex list for a tokenizer.ggml.pre name ("" means "default").
  // NOT_FOUND for names this build does not know.
  static absl::StatusOr<std::vector<std::string>> RegexesFor(std::string_view pre);

  // Compiles `regexes`; INVALID_ARGUMENT naming the regex and the position of
  // the error when one does not compile.
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> Create(std::vector<std::string> regexes);

  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Splits `text` (must be valid UTF-8) into non-empty pieces whose
  // concatenation is `text`. Appends views into `text` to *pieces.
  void Split(std::string_view text, std::vector<std::string_view>* pieces) const;

 private:
  struct Compiled;
  explicit PreTokenizer(std::vector<Compiled> compiled);

  std::vector<Compiled> compiled_;
};

}  // namespace waste::text

#endif  // WASTE_DAEMON_TEXT_PRETOKENIZER_H_
