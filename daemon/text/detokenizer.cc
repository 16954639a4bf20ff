#include "daemon/text/detokenizer.h"

#include "daemon/text/utf8.h"

namespace waste::text {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool unparse_special,
                                           bool strip_leading_space)
    : tokenizer_(tokenizer),
      unparse_special_(unparse_special),
      strip_leading_space_(strip_leading_space && tokenizer.add_space_prefix()) {
  pending_.reserve(16);
}

void StreamingDetokenizer::Push(TokenId id, std::string* out) {
  const size_t before = pending_.size();
  tokenizer_.AppendPiece(id, unparse_special_, &pending_);
  if (first_piece_ && pending_.size() > before) {
    if (strip_leading_space_ && pending_[before] == ' ') pending_.erase(before, 1);
    first_piece_ = false;
  }
  const size_t hold = IncompleteUtf8Suffix(pending_);
  // Byte tokens can spell sequences that are not UTF-8 at all (random or
  // badly trained models do): those bytes become U+FFFD, so the stream is
  // always valid UTF-8.
  out->append(SanitizeUtf8(std::string_view(pending_).substr(0, pending_.size() - hold)));
  pending_.erase(0, pending_.size() - hold);
}

void StreamingDetokenizer::Flush(std::string* out) {
  for (size_t i = 0; i < pending_.size(); ++i) AppendUtf8(kReplacementChar, out);
  pending_.clear();
}

void StreamingDetokenizer::Reset() {
  pending_.clear();
  first_piece_ = true;
}

}  // namespace waste::text
