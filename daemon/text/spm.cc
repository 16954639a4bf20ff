#include "daemon/text/spm.h"

#include "daemon/text/symbol_merge.h"
#include "daemon/text/utf8.h"

namespace waste::text {

void SpmEncode(const TokenLookup& lookup, std::string_view text, TokenId unknown,
               std::vector<TokenId>* out) {
  std::vector<MergeSymbol> symbols = SplitUtf8Symbols(text);
  // Pairs whose concatenation is a token merge, highest score first.
  MergeBestPairs(
      text, &symbols, [&](std::string_view left, std::string_view right) -> std::optional<double> {
        const TokenId id = lookup.Find(std::string_view(left.data(), left.size() + right.size()));
        if (id == kNoToken) return std::nullopt;
        return lookup.Score(id);
      });

  for (std::string_view piece : MergedPieces(text, symbols)) {
    const TokenId id = lookup.Find(piece);
    if (id != kNoToken) {
      out->push_back(id);
      continue;
    }
    for (char c : piece) {
      const TokenId byte_id = lookup.SpmByteToken(static_cast<uint8_t>(c));
      if (byte_id != kNoToken) {
        out->push_back(byte_id);
      } else if (unknown != kNoToken) {
        out->push_back(unknown);
      }
    }
  }
}

}  // namespace waste::text
