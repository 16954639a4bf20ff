// Reads a Vocab from a GGUF file's tokenizer.ggml.* metadata.
#ifndef WASTE_DAEMON_TEXT_VOCAB_GGUF_H_
#define WASTE_DAEMON_TEXT_VOCAB_GGUF_H_

#include "absl/status/statusor.h"
#include "daemon/text/vocab.h"
#include "storage/gguf.h"

namespace waste::text {

// Fills a Vocab from tokenizer.ggml.{model, pre, tokens, scores, token_type,
// merges, bos/eos/unknown/padding/seperator/eot/eom_token_id,
// add_bos_token, add_eos_token, add_space_prefix}.
//
// Keys absent from the file stay unset (the Tokenizer applies llama.cpp's
// defaults). Special-token ids outside the vocabulary (llama.cpp writes
// 0xFFFFFFFF for "none") are treated as absent, with a warning. A missing
// model or token list, an unsupported model, gpt2 without merges, or keys of
// the wrong type are INVALID_ARGUMENT / NOT_FOUND errors that name the key
// and the file.
absl::StatusOr<Vocab> VocabFromGguf(const storage::GgufFile& gguf);

}  // namespace waste::text

#endif  // WASTE_DAEMON_TEXT_VOCAB_GGUF_H_
