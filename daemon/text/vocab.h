// The tokenizer vocabulary as plain data: what a GGUF file's tokenizer.ggml.*
// keys hold, with no dependence on the file format. Tests build small
// vocabularies by hand; vocab_gguf.h fills one from a GgufFile.
//
// Fields that GGUF files may omit are std::optional: the Tokenizer applies
// llama.cpp's per-model defaults for what is absent (see tokenizer.h).
#ifndef WASTE_DAEMON_TEXT_VOCAB_H_
#define WASTE_DAEMON_TEXT_VOCAB_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace waste::text {

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

// tokenizer.ggml.model.
enum class TokenizerModel {
  kSpm,  // "llama": SentencePiece BPE over U+2581-escaped text, byte fallback.
  kBpe,  // "gpt2": byte-level BPE with a regex pre-tokenizer.
  kWpm,  // "bert": WordPiece.
};

// Parses "llama" / "gpt2" / "bert"; INVALID_ARGUMENT for anything else.
absl::Status ParseTokenizerModel(std::string_view name, TokenizerModel* model);

// tokenizer.ggml.token_type values, numbered as llama.cpp's llama_token_type.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct Vocab {
  TokenizerModel model = TokenizerModel::kSpm;
  // tokenizer.ggml.pre (BPE pre-tokenizer name); empty means "default".
  std::string pre;

  // Token texts, indexed by id; must be unique and non-empty.
  std::vector<std::string> tokens;
  // Per-token scores (SPM merge priority); empty means all 0.
  std::vector<float> scores;
  // Per-token types; empty means all kNormal.
  std::vector<TokenType> token_types;
  // BPE merges "left right"; the rank of a merge is its index.
  std::vector<std::string> merges;

  std::optional<TokenId> bos_id;
  std::optional<TokenId> eos_id;
  std::optional<TokenId> unknown_id;
  std::optional<TokenId> padding_id;
  std::optional<TokenId> separator_id;
  std::optional<TokenId> eot_id;
  std::optional<TokenId> eom_id;

  std::optional<bool> add_bos;
  std::optional<bool> add_eos;
  std::optional<bool> add_space_prefix;

  // WordPiece normalisation (tokenizer.ggml.lowercase / BERT defaults).
  std::optional<bool> lowercase;

  // OK when the arrays are consistent: scores and token_types empty or one
  // per token, no empty or duplicate token texts, ids in range.
  absl::Status Validate() const;
};

}  // namespace waste::text

#endif  // WASTE_DAEMON_TEXT_VOCAB_H_
