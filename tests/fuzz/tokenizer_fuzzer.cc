// libFuzzer target for the tokenizer on arbitrary bytes
// (tests/fuzz/run_fuzzer.sh tokenizer builds and runs it with clang;
// //tests/fuzz:tokenizer_fuzzer_test replays the committed seeds under gcc).
//
// The vocabularies are real ones from the shared fixtures
// ($WASTE_TEST_MODELS): stories260K (SentencePiece with byte fallback, what
// the tests serve), llama.cpp's llama-spm (SentencePiece, 32k), gpt-2
// (byte-level BPE) and deepseek-coder (byte-level BPE, another
// pre-tokenizer). The first input byte picks the vocabulary and the flags;
// the rest is the text. Checked for every input:
//   - every id is inside the vocabulary, and Piece() answers for it;
//   - add_special puts BOS first exactly when the vocabulary adds one;
//   - Decode(Encode(x)) == x for valid UTF-8 (for SentencePiece: without
//     its space symbol U+2581) when special tokens are not parsed, the
//     round trip the tokenizer promises (tokenizer.h, vocab_vectors_test);
//   - with special parsing, decoding with unparse_special gives x back too
//     (control tokens render as their text), for BPE: SentencePiece
//     prefixes a space to the text after each special token, as llama.cpp
//     does;
//   - the streaming detokenizer's pieces add up to the same text.
// Violations abort (WCHECK), which libFuzzer reports.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/logging.h"
#include "daemon/text/detokenizer.h"
#include "daemon/text/tokenizer.h"
#include "daemon/text/utf8.h"
#include "daemon/text/vocab_gguf.h"
#include "storage/env.h"
#include "storage/gguf.h"
#include "tests/testdata.h"

namespace waste::text {
namespace {

struct Fixture {
  const char* path;  // Under the models directory.
};

constexpr Fixture kFixtures[] = {
    {"stories260K/stories260K.gguf"},
    {"llama.cpp-vocab/ggml-vocab-llama-spm.gguf"},
    {"llama.cpp-vocab/ggml-vocab-gpt-2.gguf"},
    {"llama.cpp-vocab/ggml-vocab-deepseek-coder.gguf"},
};
constexpr size_t kNumFixtures = sizeof(kFixtures) / sizeof(kFixtures[0]);

std::unique_ptr<Tokenizer> Load(const std::string& path) {
  auto gguf = storage::GgufFile::Open(storage::Env::Default(), path);
  WCHECK(gguf.ok()) << gguf.status();
  auto vocab = VocabFromGguf(**gguf);
  WCHECK(vocab.ok()) << vocab.status();
  auto tokenizer = Tokenizer::Create(*std::move(vocab));
  WCHECK(tokenizer.ok()) << tokenizer.status();
  return *std::move(tokenizer);
}

const std::vector<std::unique_ptr<Tokenizer>>& Tokenizers() {
  static const auto* tokenizers = [] {
    auto* all = new std::vector<std::unique_ptr<Tokenizer>>();
    for (const Fixture& f : kFixtures) all->push_back(Load(testing::ModelPath(f.path)));
    return all;
  }();
  return *tokenizers;
}

std::string Hex(std::string_view s) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s.substr(0, 256)) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

void Check(size_t which, std::string_view text, bool add_special, bool parse_special) {
  const Tokenizer& t = *Tokenizers()[which];
  const std::vector<TokenId> ids = t.Encode(text, add_special, parse_special);
  for (TokenId id : ids) {
    WCHECK(id >= 0 && id < t.vocab_size()) << kFixtures[which].path << ": id " << id;
    (void)t.Piece(id);
  }
  if (add_special && t.add_bos() && t.bos() >= 0) {
    WCHECK(!ids.empty() && ids[0] == t.bos()) << kFixtures[which].path;
  }
  DetokenizeOptions raw;
  raw.clean_spaces = false;
  raw.remove_special = add_special;
  raw.unparse_special = parse_special;
  const std::string decoded = t.Decode(ids, raw);
  // Invalid UTF-8 is tokenized as llama.cpp does (SentencePiece: a bad lead
  // byte takes the next bytes with it; BPE: U+FFFD), which is not
  // reversible.
  if (t.model() == TokenizerModel::kWpm || SanitizeUtf8(text) != text) return;
  if (t.model() == TokenizerModel::kSpm) {
    // SentencePiece adds its space prefix again after every special token it
    // parses (as llama.cpp does), so text holding one does not round-trip;
    // nor does its own space symbol U+2581, which decodes as a space.
    if (parse_special && t.add_space_prefix()) return;
    if (text.find("\xE2\x96\x81") != std::string_view::npos) return;
  }
  WCHECK(decoded == text) << kFixtures[which].path << " round trip (add_special " << add_special
                          << ", parse_special " << parse_special << ") of " << Hex(text) << " gave "
                          << Hex(decoded);
  if (add_special) return;

  // The daemon's token stream: piece by piece, holding back split
  // characters, must add up to the same text.
  StreamingDetokenizer stream(t, parse_special, /*strip_leading_space=*/true);
  std::string streamed;
  for (TokenId id : ids) stream.Push(id, &streamed);
  stream.Flush(&streamed);
  WCHECK(streamed == text) << kFixtures[which].path << " streamed decode (parse_special "
                           << parse_special << ") of " << Hex(text) << " gave " << Hex(streamed);
}

}  // namespace
}  // namespace waste::text

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t which = (selector & 0x0F) % waste::text::kNumFixtures;
  const bool add_special = (selector & 0x10) != 0;
  const bool parse_special = (selector & 0x20) != 0;
  waste::text::Check(which, text, add_special, parse_special);
  return 0;
}
