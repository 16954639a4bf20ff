#include "daemon/text/vocab.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace waste::text {

absl::Status ParseTokenizerModel(std::string_view name, TokenizerModel* model) {
  if (name == "llama") {
    *model = TokenizerModel::kSpm;
  } else if (name == "gpt2") {
    *model = TokenizerModel::kBpe;
  } else if (name == "bert") {
    *model = TokenizerModel::kWpm;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported tokenizer model '", std::string(name),
                     "' (supported: llama, gpt2, bert); this model cannot be served"));
  }
  return absl::OkStatus();
}

absl::Status Vocab::Validate() const {
  const size_t n = tokens.size();
  if (n == 0) return absl::InvalidArgumentError("vocabulary has no tokens");
  if (n > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("vocabulary too large: ", n, " tokens"));
  }
  if (!scores.empty() && scores.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocabulary has ", n, " tokens but ", scores.size(), " scores"));
  }
  if (!token_types.empty() && token_types.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocabulary has ", n, " tokens but ", token_types.size(), " token types"));
  }
  absl::flat_hash_map<std::string_view, size_t> seen;
  seen.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (tokens[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("token ", i, " has empty text"));
    }
    auto [it, inserted] = seen.emplace(tokens[i], i);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat("duplicate token text '", tokens[i], "' at ids ", it->second, " and ", i));
    }
  }
  const std::pair<const char*, const std::optional<TokenId>*> ids[] = {
      {"bos", &bos_id},
      {"eos", &eos_id},
      {"unknown", &unknown_id},
      {"padding", &padding_id},
      {"separator", &separator_id},
      {"eot", &eot_id},
      {"eom", &eom_id},
  };
  for (const auto& [name, id] : ids) {
    if (id->has_value() && (**id < 0 || static_cast<size_t>(**id) >= n)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " token id ", **id, " is outside the vocabulary of ", n));
    }
  }
  return absl::OkStatus();
}

}  // namespace waste::text
