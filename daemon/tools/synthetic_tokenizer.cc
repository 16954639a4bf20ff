#include "daemon/tools/synthetic_tokenizer.h"

#include <memory>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace waste::tools {
namespace {

using storage::GgufValue;
using storage::GgufValueType;

// llama.cpp's llama_token_type.
constexpr int32_t kTokenNormal = 1;
constexpr int32_t kTokenControl = 3;
constexpr int32_t kTokenUnused = 5;

// Merges in rank order, '_' standing for a space (spelled U+0120 'Ġ' in
// byte-level vocabularies). Each result becomes a token; later merges build
// on earlier results.
constexpr std::pair<std::string_view, std::string_view> kMerges[] = {
    {"_", "t"},  {"h", "e"}, {"_", "a"},  {"i", "n"},  {"_t", "he"}, {"e", "r"},  {"o", "n"},
    {"_", "s"},  {"a", "t"}, {"e", "n"},  {"_", "w"},  {"o", "r"},   {"i", "s"},  {"_", "o"},
    {"_", "c"},  {"i", "t"}, {"a", "n"},  {"e", "s"},  {"_", "b"},   {"e", "d"},  {"_", "f"},
    {"in", "g"}, {"_", "p"}, {"o", "u"},  {"_a", "n"}, {"a", "l"},   {"a", "r"},  {"_", "m"},
    {"_", "d"},  {"_", "h"}, {"_", "i"},  {"r", "e"},  {"_t", "o"},  {"_o", "f"}, {"_an", "d"},
    {"l", "l"},  {"_", "l"}, {"_", "n"},  {"_", "e"},  {"_s", "t"},  {"a", "s"},  {"_w", "as"},
    {"_b", "e"}, {"o", "m"}, {"_h", "e"}, {"_i", "n"}, {"_i", "s"},
};

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves,
// the others (controls, space, ...) for 256 + n in byte order.
std::string ByteToken(int byte) {
  auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  uint32_t cp = byte;
  if (!printable(byte)) {
    int n = 0;
    for (int b = 0; b < byte; ++b) n += printable(b) ? 0 : 1;
    cp = 256 + n;
  }
  std::string out;
  AppendUtf8(cp, &out);
  return out;
}

std::string Spell(std::string_view piece) {
  std::string out;
  for (char c : piece) out += c == '_' ? ByteToken(' ') : std::string(1, c);
  return out;
}

}  // namespace

int64_t MinByteLevelVocab() { return 256 + std::size(kMerges) + 2; }

absl::StatusOr<TokenizerMetadata> ByteLevelTokenizer(int64_t vocab) {
  if (vocab < MinByteLevelVocab()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--vocab ", vocab, " is too small for the built-in byte-level tokenizer (",
                     MinByteLevelVocab(), " tokens at least), or pass --tokenizer-from FILE.gguf"));
  }
  std::vector<GgufValue> tokens;
  std::vector<GgufValue> types;
  std::vector<GgufValue> merges;
  absl::flat_hash_set<std::string> known;
  auto add = [&](std::string text, int32_t type) {
    known.insert(text);
    tokens.push_back(GgufValue::String(std::move(text)));
    types.push_back(GgufValue::Int32(type));
  };
  for (int b = 0; b < 256; ++b) add(ByteToken(b), kTokenNormal);
  for (const auto& [left, right] : kMerges) {
    std::string l = Spell(left), r = Spell(right);
    WCHECK(known.contains(l) && known.contains(r)) << "merge " << left << " " << right;
    WCHECK(!known.contains(l + r)) << "duplicate merge result " << left << right;
    merges.push_back(GgufValue::String(absl::StrCat(l, " ", r)));
    add(l + r, kTokenNormal);
  }
  const int64_t bos = static_cast<int64_t>(tokens.size());
  add("<|begin_of_text|>", kTokenControl);
  add("<|end_of_text|>", kTokenControl);
  for (int64_t i = 0; static_cast<int64_t>(tokens.size()) < vocab; ++i) {
    add(absl::StrCat("<|unused_", i, "|>"), kTokenUnused);
  }

  TokenizerMetadata result;
  result.vocab = static_cast<int64_t>(tokens.size());
  auto& keys = result.keys;
  keys.emplace_back("tokenizer.ggml.model", GgufValue::String("gpt2"));
  keys.emplace_back("tokenizer.ggml.pre", GgufValue::String("gpt-2"));
  keys.emplace_back("tokenizer.ggml.tokens",
                    GgufValue::Array(GgufValueType::kString, std::move(tokens)));
  keys.emplace_back("tokenizer.ggml.token_type",
                    GgufValue::Array(GgufValueType::kInt32, std::move(types)));
  keys.emplace_back("tokenizer.ggml.merges",
                    GgufValue::Array(GgufValueType::kString, std::move(merges)));
  keys.emplace_back("tokenizer.ggml.bos_token_id", GgufValue::Uint32(bos));
  keys.emplace_back("tokenizer.ggml.eos_token_id", GgufValue::Uint32(bos + 1));
  keys.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::Bool(true));
  keys.emplace_back("tokenizer.ggml.add_eos_token", GgufValue::Bool(false));
  return result;
}

absl::StatusOr<TokenizerMetadata> CopyTokenizer(storage::Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<storage::GgufFile> gguf, storage::GgufFile::Open(env, path));
  TokenizerMetadata result;
  for (const auto& [key, value] : gguf->metadata()) {
    if (key.rfind("tokenizer.", 0) == 0) result.keys.emplace_back(key, value);
  }
  const storage::GgufValue* tokens = gguf->Find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->type != GgufValueType::kArray) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        " has no tokenizer.ggml.tokens array to copy; give --tokenizer-from a GGUF with "
        "a tokenizer (any model or llama.cpp vocab file)"));
  }
  result.vocab = static_cast<int64_t>(tokens->array.size());
  return result;
}

}  // namespace waste::tools
