// Text <-> token ids for the vocabularies llama.cpp's GGUF files carry:
// SentencePiece-style (`llama`), byte-level BPE (`gpt2`, with the regex
// pre-tokenizer named by tokenizer.ggml.pre) and WordPiece (`bert`).
// Behaviour follows llama.cpp's llama-vocab.cpp: the same defaults for keys
// a file omits, the same special-token splitting, the same merge order, so
// that ids match what llama.cpp (and the Hugging Face tokenizer it mirrors)
// produce.
//
// A Tokenizer is immutable after Create and safe to use from many threads.
#ifndef WASTE_DAEMON_TEXT_TOKENIZER_H_
#define WASTE_DAEMON_TEXT_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "daemon/text/vocab.h"

namespace waste::text {

class BpeModel;
class PreTokenizer;
class TokenLookup;

// Per-token attributes (bit set), derived from tokenizer.ggml.token_type.
enum TokenAttr : uint32_t {
  kAttrNormal = 1 << 0,
  kAttrUnknown = 1 << 1,
  kAttrControl = 1 << 2,
  kAttrUserDefined = 1 << 3,
  kAttrUnused = 1 << 4,
  kAttrByte = 1 << 5,
};

struct DetokenizeOptions {
  // Skip a leading BOS / trailing EOS that add_special would have added.
  bool remove_special = false;
  // Render control and unknown tokens as their text ("<s>") instead of "".
  bool unparse_special = false;
  // SentencePiece vocabularies with a space prefix: drop one leading space
  // from the first piece, undoing the prefix the encoder added. (llama.cpp
  // keeps that space when it skipped a BOS; here the text starts clean.)
  bool strip_leading_space = true;
  // Apply the vocabulary's clean_up_tokenization_spaces rules (" ," -> ",",
  // " 's" -> "'s", ...) where the model uses them (most gpt2-style BPE).
  bool clean_spaces = true;
};

class Tokenizer {
 public:
  // Takes ownership of `vocab`. INVALID_ARGUMENT for inconsistent
  // vocabularies (Vocab::Validate), bad merges, add_bos without a BOS id;
  // NOT_FOUND for an unknown BPE pre-tokenizer name.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(Vocab vocab);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Appends the ids of `text`. `add_special` adds BOS / EOS (SEP for
  // WordPiece) as the vocabulary asks; `parse_special` turns the literal
  // text of control tokens ("<|im_end|>") into those tokens. User-defined
  // tokens are always matched whole, as in llama.cpp. Invalid UTF-8 is
  // tokenized byte-wise (SPM) or as U+FFFD (BPE); never an error.
  void Encode(std::string_view text, bool add_special, bool parse_special,
              std::vector<TokenId>* out) const;
  std::vector<TokenId> Encode(std::string_view text, bool add_special = false,
                              bool parse_special = false) const;

  // A rendered chat prompt: Encode with add_special and parse_special,
  // without a second BOS when the template writes the BOS token itself (as
  // GLM's [gMASK] does) in a file that also asks for one.
  std::vector<TokenId> EncodeChat(std::string_view rendered) const;

  // The bytes token `id` stands for (U+2581 -> space, <0xXX> -> that byte,
  // GPT-2 byte symbols -> bytes). May be a partial UTF-8 sequence. Control
  // and unknown tokens render as their text. `id` must be in range.
  const std::string& Piece(TokenId id) const { return pieces_[id]; }
  // Appends Piece(id), or nothing for control/unknown tokens unless
  // `special`.
  void AppendPiece(TokenId id, bool special, std::string* out) const;

  // Ids -> text (concatenated pieces plus the options' clean-ups). Ids out
  // of range render as nothing.
  std::string Decode(absl::Span<const TokenId> ids, const DetokenizeOptions& options = {}) const;

  const Vocab& vocab() const { return vocab_; }
  int32_t vocab_size() const { return static_cast<int32_t>(vocab_.tokens.size()); }
  TokenizerModel model() const { return vocab_.model; }
  // kNoToken when the vocabulary has none.
  TokenId bos() const { return bos_; }
  TokenId eos() const { return eos_; }
  TokenId unknown() const { return unk_; }
  TokenId separator() const { return sep_; }
  TokenId padding() const { return pad_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  bool clean_spaces() const { return clean_spaces_; }

  uint32_t attributes(TokenId id) const { return attrs_[id]; }
  bool IsControl(TokenId id) const { return (attrs_[id] & kAttrControl) != 0; }
  // End of generation: EOS, EOT, EOM and tokens whose text marks a turn end
  // (<|im_end|>, <|eot_id|>, <end_of_turn>, ...), as llama.cpp detects them.
  bool IsEog(TokenId id) const { return eog_.contains(id); }
  const absl::flat_hash_set<TokenId>& eog_tokens() const { return eog_; }

 private:
  struct Fragment {
    TokenId token;  // kNoToken for raw text.
    size_t offset;
    size_t length;
  };

  explicit Tokenizer(Vocab vocab);
  absl::Status Init();
  // Markup a reply's reader parses, rendered as text (harmony's, reasoning
  // blocks, tool calls), and o200k_harmony's end tokens as llama.cpp takes
  // them.
  void MarkupTokens();
  void Partition(std::string_view text, bool parse_special, std::vector<Fragment>* out) const;
  std::string RenderPiece(TokenId id) const;
  void EncodeWordPiece(std::string_view text, std::vector<TokenId>* out) const;

  Vocab vocab_;
  std::unique_ptr<TokenLookup> lookup_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;  // BPE only.
  std::unique_ptr<BpeModel> bpe_;                // BPE only.

  TokenId bos_ = kNoToken;
  TokenId eos_ = kNoToken;
  TokenId unk_ = kNoToken;
  TokenId sep_ = kNoToken;
  TokenId pad_ = kNoToken;
  bool add_bos_ = false;
  bool add_eos_ = false;
  bool add_space_prefix_ = false;
  bool clean_spaces_ = false;
  bool ignore_merges_ = false;
  bool lowercase_ = false;  // WordPiece.

  std::vector<uint32_t> attrs_;
  std::vector<std::string> pieces_;
  // Control, user-defined and unknown tokens, longest text first: the
  // order in which their literal text is split out of raw input.
  std::vector<TokenId> special_tokens_;
  absl::flat_hash_set<TokenId> eog_;
};

}  // namespace waste::text

#endif  // WASTE_DAEMON_TEXT_TOKENIZER_H_
