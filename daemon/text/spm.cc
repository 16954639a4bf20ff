#include "daemon/text/spm.h"

#include <queue>

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
  float score;
  size_t len;
};

// Highest score first; on equal scores the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

void SpmEncode(const TokenLookup& lookup, std::string_view text, TokenId unknown,
               std::vector<TokenId>* out) {
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) {
    const size_t len = std::min(Utf8SeqLen(text[offset]), text.size() - offset);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back(Symbol{index - 1, offset + len == text.size() ? -1 : index + 1, offset, len});
    offset += len;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const size_t len = symbols[left].len + symbols[right].len;
    const TokenId id = lookup.Find(text.substr(symbols[left].start, len));
    if (id == kNoToken) return;
    queue.push(Bigram{left, right, lookup.Score(id), len});
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
