// Text -> id lookup over a Vocab, shared by the SPM, BPE and WordPiece
// encoders. Immutable after construction; safe to share between threads.
#ifndef WASTE_DAEMON_TEXT_TOKEN_LOOKUP_H_
#define WASTE_DAEMON_TEXT_TOKEN_LOOKUP_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "daemon/text/vocab.h"

namespace waste::text {

class TokenLookup {
 public:
  // `vocab` must outlive this object and be valid (Vocab::Validate).
  explicit TokenLookup(const Vocab& vocab);

  const Vocab& vocab() const { return *vocab_; }
  int32_t size() const { return static_cast<int32_t>(vocab_->tokens.size()); }

  // The id whose text is exactly `text`, or kNoToken.
  TokenId Find(std::string_view text) const;
  float Score(TokenId id) const { return vocab_->scores.empty() ? 0.0f : vocab_->scores[id]; }
  TokenType Type(TokenId id) const {
    return vocab_->token_types.empty() ? TokenType::kNormal : vocab_->token_types[id];
  }
  // SentencePiece byte fallback: the <0xXX> token, else a token that is the
  // single byte itself, else kNoToken.
  TokenId SpmByteToken(uint8_t byte) const { return spm_bytes_[byte]; }
  // Longest token text in bytes (bounds WordPiece's search).
  size_t max_token_bytes() const { return max_token_bytes_; }

 private:
  const Vocab* vocab_;
  absl::flat_hash_map<std::string, TokenId> ids_;
  TokenId spm_bytes_[256];
  size_t max_token_bytes_ = 0;
};

}  // namespace waste::text

#endif  // WASTE_DAEMON_TEXT_TOKEN_LOOKUP_H_
