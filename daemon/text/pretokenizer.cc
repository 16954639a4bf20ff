#include "daemon/text/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/text/utf8.h"

namespace waste::text {
namespace {

// The regexes below are llama.cpp's (src/llama-vocab.cpp) for each
// pre-tokenizer type, themselves the Hugging Face tokenizer.json Split
// patterns with case-insensitive groups spelled out in ASCII.

constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kDeepseekLlmLetters =
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293"
    "\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c"
    "\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5"
    "\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77"
    "\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59"
    "\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc"
    "\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107"
    "\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139"
    "\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee"
    "\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e"
    "\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f"
    "\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2"
    "\U000118a0-\U000118df\U0001e900-\U0001e943]+";

constexpr const char* kDeepseekLlmPunct =
    "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+";

constexpr const char* kCjkHangul = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+";

constexpr const char* kDeepseekV3Main =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kBloom = " ?[^(\\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+";

constexpr const char* kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Kimi-K2's own pattern (Moonshot's tokenization_kimi.py, for tiktoken):
// gpt-4o's with Han runs split off and kept out of the letter classes. Its
// [class&&[^\p{Han}]] intersections become a (?!\p{Han}) lookahead per
// character. llama.cpp runs a hand-written splitter for "kimi-k2" that does
// not split camelCase ("getUserName" one piece, here "get", "User", "Name"
// as the model's tokenizer does); pretokenizer_test holds goldens from the
// pattern itself.
constexpr const char* kKimiK2 =
    R"([\p{Han}]+|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kSeedCoder =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool OneOf(std::string_view name, std::initializer_list<std::string_view> names) {
  for (std::string_view n : names) {
    if (name == n) return true;
  }
  return false;
}

}  // namespace

struct PreTokenizer::Compiled {
  std::string source;
  pcre2_code* code = nullptr;
};

absl::StatusOr<std::vector<std::string>> PreTokenizer::RegexesFor(std::string_view pre) {
  if (pre.empty() || pre == "default") {
    return std::vector<std::string>{R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)",
                                    "[0-9][0-9][0-9]"};
  }
  if (OneOf(pre, {"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral", "dbrx", "smaug-bpe",
                  "chatglm-bpe", "glm4"})) {
    return std::vector<std::string>{kLlama3};
  }
  if (pre == "deepseek-llm") {
    return std::vector<std::string>{"[\r\n]",  kDeepseekLlmLetters, kDeepseekLlmPunct,
                                    R"(\s+$)", kCjkHangul,          R"(\p{N}+)"};
  }
  if (pre == "deepseek-coder") {
    return std::vector<std::string>{"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjkHangul,
                                    R"(\p{N})"};
  }
  if (pre == "deepseek-v3") {
    return std::vector<std::string>{R"(\p{N}{1,3})", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
                                    kDeepseekV3Main};
  }
  if (pre == "falcon") {
    return std::vector<std::string>{R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"};
  }
  if (OneOf(pre,
            {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"})) {
    return std::vector<std::string>{R"(\p{N})", kGpt2};
  }
  if (OneOf(pre, {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
                  "jina-v1-en", "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais", "trillion",
                  "granite-docling", "exaone4", "a.x-4.0", "mellum"})) {
    return std::vector<std::string>{kGpt2};
  }
  if (OneOf(pre, {"qwen2", "deepseek-r1-qwen", "stablelm2", "hunyuan", "megrez"})) {
    return std::vector<std::string>{kQwen2};
  }
  if (OneOf(pre, {"poro-chat", "bloom", "gpt3-finnish"})) {
    return std::vector<std::string>{kBloom};
  }
  if (pre == "viking") return std::vector<std::string>{kBloom, R"(\p{N})"};
  if (pre == "tekken") return std::vector<std::string>{kTekken};
  if (OneOf(pre, {"gpt-4o", "llama4"})) return std::vector<std::string>{kGpt4o};
  if (pre == "kimi-k2") return std::vector<std::string>{kKimiK2};
  if (pre == "seed-coder") return std::vector<std::string>{kSeedCoder};
  return absl::NotFoundError(absl::StrCat("unknown BPE pre-tokenizer '", std::string(pre),
                                          "' (tokenizer.ggml.pre); this build cannot tokenize "
                                          "for this model"));
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::Create(
    std::vector<std::string> regexes) {
  std::vector<Compiled> compiled;
  compiled.reserve(regexes.size());
  for (std::string& source : regexes) {
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    // MATCH_INVALID_UTF: stray bytes never match instead of failing the
    // whole call, and no O(n) UTF check runs per pcre2_match call.
    // DOLLAR_ENDONLY: `$` means end of piece, as in std::regex.
    pcre2_code* code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY,
                      &error, &error_offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      for (Compiled& c : compiled) pcre2_code_free(c.code);
      return absl::InvalidArgumentError(absl::StrCat("pre-tokenizer regex '", source,
                                                     "' does not compile at offset ", error_offset,
                                                     ": ", reinterpret_cast<char*>(message)));
    }
    // JIT is an optimisation only; matching falls back to the interpreter.
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    compiled.push_back(Compiled{std::move(source), code});
  }
  return std::unique_ptr<PreTokenizer>(new PreTokenizer(std::move(compiled)));
}

PreTokenizer::PreTokenizer(std::vector<Compiled> compiled) : compiled_(std::move(compiled)) {}

PreTokenizer::~PreTokenizer() {
  for (Compiled& c : compiled_) pcre2_code_free(c.code);
}

void PreTokenizer::Split(std::string_view text, std::vector<std::string_view>* pieces) const {
  if (text.empty()) return;
  std::vector<std::string_view> current{text};
  std::vector<std::string_view> next;
  for (const Compiled& regex : compiled_) {
    pcre2_match_data* match = pcre2_match_data_create_from_pattern(regex.code, nullptr);
    next.clear();
    for (std::string_view piece : current) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t offset = 0;
      size_t gap_start = 0;
      while (offset < piece.size()) {
        int rc = pcre2_match(regex.code, subject, piece.size(), offset, 0, match, nullptr);
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
          // JIT stack exhaustion on pathological input: retry interpreted.
          rc = pcre2_match(regex.code, subject, piece.size(), offset, PCRE2_NO_JIT, match, nullptr);
        }
        if (rc < 0) break;
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
        const size_t start = ovector[0];
        const size_t end = ovector[1];
        if (end <= start) {
          // An empty match splits nothing; move on by one character.
          offset = start + Utf8SeqLen(piece[start < piece.size() ? start : piece.size() - 1]);
          continue;
        }
        if (start > gap_start) next.push_back(piece.substr(gap_start, start - gap_start));
        next.push_back(piece.substr(start, end - start));
        gap_start = offset = end;
      }
      if (gap_start < piece.size()) next.push_back(piece.substr(gap_start));
    }
    pcre2_match_data_free(match);
    current.swap(next);
  }
  pieces->insert(pieces->end(), current.begin(), current.end());
}

}  // namespace waste::text
