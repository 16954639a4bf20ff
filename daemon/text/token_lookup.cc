#include "daemon/text/token_lookup.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace waste::text {

TokenLookup::TokenLookup(const Vocab& vocab) : vocab_(&vocab) {
  ids_.reserve(vocab.tokens.size());
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    ids_.emplace(vocab.tokens[i], static_cast<TokenId>(i));
    max_token_bytes_ = std::max(max_token_bytes_, vocab.tokens[i].size());
  }
  for (int b = 0; b < 256; ++b) {
    TokenId id = Find(absl::StrFormat("<0x%02X>", b));
    if (id == kNoToken) id = Find(std::string(1, static_cast<char>(b)));
    spm_bytes_[b] = id;
  }
}

TokenId TokenLookup::Find(std::string_view text) const {
  auto it = ids_.find(absl::string_view(text.data(), text.size()));
  return it == ids_.end() ? kNoToken : it->second;
}

}  // namespace waste::text
