#include "daemon/text/symbol_merge.h"

#include <algorithm>
#include <queue>

#include "daemon/text/utf8.h"

namespace waste::text {
namespace {

struct Bigram {
  int left;
  int right;
  double priority;
  size_t len;  // Of the pair when queued: a stale entry no longer matches.
};

struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
  }
};

}  // namespace

std::vector<MergeSymbol> SplitUtf8Symbols(std::string_view text) {
  std::vector<MergeSymbol> symbols;
  symbols.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) {
    const size_t len = std::min(Utf8SeqLen(text[offset]), text.size() - offset);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, offset + len == text.size() ? -1 : index + 1, offset, len});
    offset += len;
  }
  return symbols;
}

void MergeBestPairs(
    std::string_view text, std::vector<MergeSymbol>* symbols,
    absl::FunctionRef<std::optional<double>(std::string_view left, std::string_view right)>
        priority) {
  std::vector<MergeSymbol>& s = *symbols;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const MergeSymbol& l = s[left];
    const MergeSymbol& r = s[right];
    std::optional<double> p = priority(text.substr(l.start, l.len), text.substr(r.start, r.len));
    if (p.has_value()) queue.push(Bigram{left, right, *p, l.len + r.len});
  };
  for (int i = 1; i < static_cast<int>(s.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    MergeSymbol& left = s[bigram.left];
    MergeSymbol& right = s[bigram.right];
    // Stale entry: one side was merged elsewhere since it was queued.
    if (left.len == 0 || right.len == 0 || left.len + right.len != bigram.len) continue;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) s[right.next].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }
}

std::vector<std::string_view> MergedPieces(std::string_view text,
                                           const std::vector<MergeSymbol>& symbols) {
  std::vector<std::string_view> pieces;
  for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
    pieces.push_back(text.substr(symbols[i].start, symbols[i].len));
  }
  return pieces;
}

}  // namespace waste::text
