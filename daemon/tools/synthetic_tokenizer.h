// Tokenizer metadata (the tokenizer.* GGUF keys) for synthetic models:
// either copied from a real GGUF, or a small self-made byte-level BPE
// vocabulary that any GPT-2-style tokenizer can run.
#ifndef WASTE_DAEMON_TOOLS_SYNTHETIC_TOKENIZER_H_
#define WASTE_DAEMON_TOOLS_SYNTHETIC_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/env.h"
#include "storage/gguf.h"

namespace waste::tools {

struct TokenizerMetadata {
  std::vector<std::pair<std::string, storage::GgufValue>> keys;  // tokenizer.*
  int64_t vocab = 0;  // Entries of tokenizer.ggml.tokens.
};

// Tokens the built-in tokenizer needs at least: 256 bytes, its merges, BOS
// and EOS.
int64_t MinByteLevelVocab();

// tokenizer.ggml.model "gpt2" (pre "gpt-2"): token i < 256 is byte i in
// GPT-2's byte-to-unicode spelling, then a few dozen merges of common English
// pairs, <|begin_of_text|> (BOS, control) and <|end_of_text|> (EOS, control),
// and "<|unused_N|>" (type unused) up to `vocab` tokens. `vocab` must be at
// least MinByteLevelVocab() (INVALID_ARGUMENT otherwise).
absl::StatusOr<TokenizerMetadata> ByteLevelTokenizer(int64_t vocab);

// Every tokenizer.* key of the GGUF at `path`. Errors: the reader's, or
// INVALID_ARGUMENT when it has no tokenizer.ggml.tokens.
absl::StatusOr<TokenizerMetadata> CopyTokenizer(storage::Env* env, const std::string& path);

}  // namespace waste::tools

#endif  // WASTE_DAEMON_TOOLS_SYNTHETIC_TOKENIZER_H_
