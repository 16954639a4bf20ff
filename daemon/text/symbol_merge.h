// The pair-merging loop that SentencePiece (by score) and byte-level BPE (by
// merge rank) share: text starts as one symbol per UTF-8 character, and the
// best-ranked adjacent pair is merged until no pair ranks.
#ifndef WASTE_DAEMON_TEXT_SYMBOL_MERGE_H_
#define WASTE_DAEMON_TEXT_SYMBOL_MERGE_H_

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"

namespace waste::text {

// A run of the text, linked to its neighbours; len is 0 once merged into
// its left neighbour.
struct MergeSymbol {
  int prev;
  int next;
  size_t start;
  size_t len;
};

// One symbol per UTF-8 sequence of `text` (malformed bytes are symbols of
// their own).
std::vector<MergeSymbol> SplitUtf8Symbols(std::string_view text);

// Merges adjacent symbols while some pair has a priority: always the pair
// with the highest one, the leftmost on ties. `priority` sees the two
// neighbours' text (contiguous in `text`) and returns nullopt when they do
// not merge.
void MergeBestPairs(
    std::string_view text, std::vector<MergeSymbol>* symbols,
    absl::FunctionRef<std::optional<double>(std::string_view left, std::string_view right)>
        priority);

// The surviving symbols' text, in order.
std::vector<std::string_view> MergedPieces(std::string_view text,
                                           const std::vector<MergeSymbol>& symbols);

}  // namespace waste::text

#endif  // WASTE_DAEMON_TEXT_SYMBOL_MERGE_H_
