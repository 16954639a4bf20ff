// Byte-level BPE (GPT-2 style) as llama.cpp does it for `gpt2`
// vocabularies: each pre-tokenized word is spelled in GPT-2's byte-to-unicode
// alphabet, then adjacent symbols are merged by merge rank (lowest first,
// leftmost on ties) until no listed merge applies.
//
// Immutable after construction; safe to share between threads.
#ifndef WASTE_DAEMON_TEXT_BPE_H_
#define WASTE_DAEMON_TEXT_BPE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "daemon/text/token_lookup.h"

namespace waste::text {

class BpeModel {
 public:
  // Indexes lookup.vocab().merges ("left right", rank = index). A merge
  // without a separating space is refused.
  static absl::StatusOr<BpeModel> Create(const TokenLookup& lookup);

  // Appends the tokens of one pre-tokenized word (raw UTF-8; the byte
  // encoding is applied here). With `ignore_merges`, a word that is itself
  // a token is emitted whole (llama3-style vocabularies).
  void EncodeWord(std::string_view word, bool ignore_merges, std::vector<TokenId>* out) const;

  // Rank of merging `left` and `right` (byte-encoded texts), or -1.
  int Rank(std::string_view left, std::string_view right) const;

 private:
  explicit BpeModel(const TokenLookup& lookup) : lookup_(&lookup) {}

  const TokenLookup* lookup_;
  // Keyed by "left right" exactly as the merge list spells it.
  absl::flat_hash_map<std::string, int> ranks_;
};

}  // namespace waste::text

#endif  // WASTE_DAEMON_TEXT_BPE_H_
