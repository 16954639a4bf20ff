#include "daemon/text/vocab_gguf.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace waste::text {
namespace {

// The value of an optional key: nullopt when absent, an error when present
// but unusable.
template <typename T>
absl::StatusOr<std::optional<T>> Optional(absl::StatusOr<T> value) {
  if (value.ok()) return std::optional<T>(*std::move(value));
  if (absl::IsNotFound(value.status())) return std::optional<T>();
  return value.status();
}

absl::Status InFile(const storage::GgufFile& gguf, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(gguf.path(), ": ", status.message()));
}

}  // namespace

absl::StatusOr<Vocab> VocabFromGguf(const storage::GgufFile& gguf) {
  Vocab vocab;
  absl::StatusOr<std::string> model = gguf.GetString("tokenizer.ggml.model");
  if (!model.ok()) return InFile(gguf, model.status());
  if (absl::Status s = ParseTokenizerModel(*model, &vocab.model); !s.ok()) return InFile(gguf, s);

  auto pre = Optional(gguf.GetString("tokenizer.ggml.pre"));
  if (!pre.ok()) return InFile(gguf, pre.status());
  vocab.pre = pre->value_or("");

  absl::StatusOr<std::vector<std::string>> tokens = gguf.GetStringArray("tokenizer.ggml.tokens");
  if (!tokens.ok()) return InFile(gguf, tokens.status());
  vocab.tokens = *std::move(tokens);
  const size_t n = vocab.tokens.size();

  if (gguf.Has("tokenizer.ggml.scores")) {
    absl::StatusOr<std::vector<float>> scores = gguf.GetFloatArray("tokenizer.ggml.scores");
    if (!scores.ok()) {
      // Some converters write integer scores.
      absl::StatusOr<std::vector<int64_t>> ints = gguf.GetIntArray("tokenizer.ggml.scores");
      if (!ints.ok()) return InFile(gguf, scores.status());
      scores.emplace(ints->begin(), ints->end());
    }
    vocab.scores = *std::move(scores);
  }

  auto types = Optional(gguf.GetIntArray("tokenizer.ggml.token_type"));
  if (!types.ok()) return InFile(gguf, types.status());
  if (types->has_value()) {
    vocab.token_types.reserve((*types)->size());
    for (int64_t t : **types) {
      vocab.token_types.push_back(t >= 0 && t <= 6 ? static_cast<TokenType>(t)
                                                   : TokenType::kUndefined);
    }
  }

  auto merges = Optional(gguf.GetStringArray("tokenizer.ggml.merges"));
  if (!merges.ok()) return InFile(gguf, merges.status());
  if (merges->has_value()) vocab.merges = std::move(**merges);
  if (vocab.model == TokenizerModel::kBpe && vocab.merges.empty()) {
    return InFile(gguf, absl::InvalidArgumentError(
                            "tokenizer.ggml.model is gpt2 but tokenizer.ggml.merges is missing"));
  }

  const std::pair<const char*, std::optional<TokenId>*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &vocab.bos_id},
      {"tokenizer.ggml.eos_token_id", &vocab.eos_id},
      {"tokenizer.ggml.unknown_token_id", &vocab.unknown_id},
      {"tokenizer.ggml.padding_token_id", &vocab.padding_id},
      {"tokenizer.ggml.seperator_token_id", &vocab.separator_id},  // Sic: GGUF's spelling.
      {"tokenizer.ggml.eot_token_id", &vocab.eot_id},
      {"tokenizer.ggml.eom_token_id", &vocab.eom_id},
  };
  for (const auto& [key, field] : ids) {
    const storage::GgufValue* value = gguf.Find(key);
    if (value == nullptr) continue;
    auto id = gguf.GetInt(key);
    if (!id.ok()) return InFile(gguf, id.status());
    if (*id < 0 || static_cast<uint64_t>(*id) >= n) {
      WLOG(WARNING) << gguf.path() << ": " << key << " = " << *id << " is outside the vocabulary ("
                    << n << " tokens); treating it as absent";
      continue;
    }
    *field = static_cast<TokenId>(*id);
  }

  const std::pair<const char*, std::optional<bool>*> flags[] = {
      {"tokenizer.ggml.add_bos_token", &vocab.add_bos},
      {"tokenizer.ggml.add_eos_token", &vocab.add_eos},
      {"tokenizer.ggml.add_space_prefix", &vocab.add_space_prefix},
  };
  for (const auto& [key, field] : flags) {
    auto flag = Optional(gguf.GetBool(key));
    if (!flag.ok()) return InFile(gguf, flag.status());
    *field = *flag;
  }

  if (absl::Status s = vocab.Validate(); !s.ok()) return InFile(gguf, s);
  return vocab;
}

}  // namespace waste::text
