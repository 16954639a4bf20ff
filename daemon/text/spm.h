// SentencePiece-style encoding as llama.cpp does it for `llama` vocabularies:
// start from UTF-8 characters, repeatedly merge the adjacent pair whose
// concatenation is the highest-scoring token (leftmost on ties), then emit
// each remaining piece as its token, or as <0xXX> byte tokens when it has
// none.
#ifndef WASTE_DAEMON_TEXT_SPM_H_
#define WASTE_DAEMON_TEXT_SPM_H_

#include <string_view>
#include <vector>

#include "daemon/text/token_lookup.h"
#include "daemon/text/vocab.h"

namespace waste::text {

// Appends the tokens of `text`, which the caller has already escaped
// (spaces as U+2581, space prefix added). Bytes with no byte token and no
// single-byte token become `unknown` (skipped when kNoToken).
void SpmEncode(const TokenLookup& lookup, std::string_view text, TokenId unknown,
               std::vector<TokenId>* out);

}  // namespace waste::text

#endif  // WASTE_DAEMON_TEXT_SPM_H_
