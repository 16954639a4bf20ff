// Incremental detokenization for the daemon's token stream: turns ids into
// text as they are generated, holding back the bytes of a UTF-8 character
// that is split across tokens (byte-fallback or byte-level BPE tokens) until
// it is complete, so no chunk handed to a client ends inside a character.
// Bytes that can never form a character (a stray continuation byte) pass
// through unchanged.
//
// Not thread-safe: one per generation stream. Allocates only when a piece is
// longer than anything seen before (the buffers keep their capacity).
#ifndef WASTE_DAEMON_TEXT_DETOKENIZER_H_
#define WASTE_DAEMON_TEXT_DETOKENIZER_H_

#include <string>

#include "daemon/text/tokenizer.h"

namespace waste::text {

class StreamingDetokenizer {
 public:
  // `tokenizer` must outlive this object. `unparse_special` renders control
  // tokens as their text. `strip_leading_space` drops the space prefix of
  // the first piece (SentencePiece vocabularies only); leave it false when
  // the stream continues a prompt.
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool unparse_special = false,
                                bool strip_leading_space = false);

  // Appends to *out the text that `id` completes (possibly nothing); always
  // valid UTF-8 (malformed bytes become U+FFFD).
  void Push(TokenId id, std::string* out);

  // End of stream: appends whatever is still held back (an incomplete
  // sequence is emitted as U+FFFD per byte rather than dropped).
  void Flush(std::string* out);

  // Starts a new stream.
  void Reset();

  // Bytes currently held back.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  const bool unparse_special_;
  const bool strip_leading_space_;
  bool first_piece_ = true;
  std::string pending_;
};

}  // namespace waste::text

#endif  // WASTE_DAEMON_TEXT_DETOKENIZER_H_
