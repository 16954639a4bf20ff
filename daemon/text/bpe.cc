#include "daemon/text/bpe.h"

#include <algorithm>
#include <queue>

#include "absl/strings/str_cat.h"
#include "daemon/text/symbol_merge.h"
#include "daemon/text/utf8.h"

namespace waste::text {
namespace {}  // namespace

absl::StatusOr<BpeModel> BpeModel::Create(const TokenLookup& lookup) {
  BpeModel model(lookup);
  const std::vector<std::string>& merges = lookup.vocab().merges;
  model.ranks_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    // Split at the first space after the first byte, so that a left side
    // that is itself a space-like symbol stays whole (as llama.cpp does).
    if (merges[i].size() < 3 || merges[i].find(' ', 1) == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("BPE merge ", i, " '", merges[i], "' is not of the form 'left right'"));
    }
    // Later duplicates keep the first (lowest) rank.
    model.ranks_.emplace(merges[i], static_cast<int>(i));
  }
  return model;
}

int BpeModel::Rank(std::string_view left, std::string_view right) const {
  std::string key;
  key.reserve(left.size() + 1 + right.size());
  key.append(left).push_back(' ');
  key.append(right);
  auto it = ranks_.find(key);
  return it == ranks_.end() ? -1 : it->second;
}

void BpeModel::EncodeWord(std::string_view word, bool ignore_merges,
                          std::vector<TokenId>* out) const {
  std::string encoded;
  encoded.reserve(word.size() * 2);
  for (char c : word) encoded.append(ByteToGpt2Char(static_cast<uint8_t>(c)));

  if (ignore_merges) {
    const TokenId id = lookup_->Find(encoded);
    if (id != kNoToken) {
      out->push_back(id);
      return;
    }
  }

  const std::string_view text = encoded;
  std::vector<MergeSymbol> symbols = SplitUtf8Symbols(text);
  std::string key;
  // Lower merge ranks merge first.
  MergeBestPairs(text, &symbols,
                 [&](std::string_view left, std::string_view right) -> std::optional<double> {
                   key.assign(left).push_back(' ');
                   key.append(right);
                   auto it = ranks_.find(key);
                   if (it == ranks_.end()) return std::nullopt;
                   return -static_cast<double>(it->second);
                 });

  for (std::string_view piece : MergedPieces(text, symbols)) {
    const TokenId id = lookup_->Find(piece);
    if (id != kNoToken) {
      out->push_back(id);
      continue;
    }
    // No token for the merged piece: fall back to one token per byte
    // symbol; bytes the vocabulary lacks are dropped, as in llama.cpp.
    for (size_t k = 0; k < piece.size();) {
      const size_t len = std::min(Utf8SeqLen(piece[k]), piece.size() - k);
      const TokenId byte_id = lookup_->Find(piece.substr(k, len));
      if (byte_id != kNoToken) out->push_back(byte_id);
      k += len;
    }
  }
}

}  // namespace waste::text
