#include "daemon/text/bpe.h"

#include <algorithm>
#include <queue>

#include "absl/strings/str_cat.h"
#include "daemon/text/utf8.h"

namespace waste::text {
namespace {

struct Symbol {
  int prev;
  int next;
  size_t start;
  size_t len;  // 0 once merged into its left neighbour.
};

struct Bigram {
  int left;
  int right;
  int rank;
  size_t len;
};

// Lowest rank first; on equal ranks the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

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
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (size_t offset = 0; offset < text.size();) {
    const size_t len = std::min(Utf8SeqLen(text[offset]), text.size() - offset);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back(Symbol{index - 1, offset + len == text.size() ? -1 : index + 1, offset, len});
    offset += len;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  std::string key;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    key.assign(text.substr(l.start, l.len)).push_back(' ');
    key.append(text.substr(r.start, r.len));
    auto it = ranks_.find(key);
    if (it == ranks_.end()) return;
    queue.push(Bigram{left, right, it->second, l.len + r.len});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    // Stale entry: one side was merged elsewhere since it was queued.
    if (left.len == 0 || right.len == 0 || left.len + right.len != bigram.len) continue;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }

  for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].start, symbols[i].len);
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
