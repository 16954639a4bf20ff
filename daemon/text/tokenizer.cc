#include "daemon/text/tokenizer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "daemon/text/bpe.h"
#include "daemon/text/pretokenizer.h"
#include "daemon/text/spm.h"
#include "daemon/text/token_lookup.h"
#include "daemon/text/utf8.h"

namespace waste::text {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581

bool OneOf(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

uint32_t AttrFromType(TokenType type) {
  switch (type) {
    case TokenType::kNormal:
      return kAttrNormal;
    case TokenType::kUnknown:
      return kAttrUnknown;
    case TokenType::kControl:
      return kAttrControl;
    case TokenType::kUserDefined:
      return kAttrUserDefined;
    case TokenType::kUnused:
      return kAttrUnused;
    case TokenType::kByte:
      return kAttrByte;
    case TokenType::kUndefined:
      break;
  }
  return 0;
}

// Token texts that end a turn in common chat formats. llama.cpp treats them
// as end-of-generation (and as control tokens) whatever the file says.
bool IsEogText(std::string_view text) {
  return OneOf(text, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
                      "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
                      "<|end_of_text|>", "<end_of_utterance>",
                      "<\xEF\xBD\x9C"
                      "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"});
}

void ReplaceAll(std::string* s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s->size());
  size_t pos = 0;
  while (true) {
    const size_t hit = s->find(from, pos);
    if (hit == std::string::npos) break;
    out.append(*s, pos, hit - pos).append(to);
    pos = hit + from.size();
  }
  out.append(*s, pos, std::string::npos);
  s->swap(out);
}

// llama.cpp's clean_up_tokenization_spaces, pass by pass.
void CleanSpaces(std::string* text) {
  std::string& s = *text;
  auto pass = [&](auto&& keep) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
      if (!keep(i, &out)) continue;
      out.push_back(s[i]);
    }
    s.swap(out);
  };
  // " ?", " !", " .", " ," lose the space.
  pass([&](size_t i, std::string* out) {
    const char x = s[i];
    if (i > 0 && s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') &&
        !out->empty() && out->back() == ' ') {
      out->pop_back();
    }
    return true;
  });
  // " ' " becomes "'".
  {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\'' && i > 0 && i + 1 < s.size() && s[i - 1] == ' ' && s[i + 1] == ' ') {
        if (!out.empty() && out.back() == ' ') out.pop_back();
        out.push_back('\'');
        ++i;  // Drop the following space.
        continue;
      }
      out.push_back(s[i]);
    }
    s.swap(out);
  }
  // " 's", " 'm", " 're", " 've" lose the space.
  pass([&](size_t i, std::string* out) {
    if (i > 0 && s[i - 1] == ' ' && s[i] == '\'' && i + 1 < s.size()) {
      const char x1 = s[i + 1];
      const char x2 = i + 2 < s.size() ? s[i + 2] : '\0';
      const bool drop =
          x1 == 's' || x1 == 'm' || (i + 2 < s.size() && (x1 == 'r' || x1 == 'v') && x2 == 'e');
      if (drop && !out->empty() && out->back() == ' ') out->pop_back();
    }
    return true;
  });
}

}  // namespace

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(Vocab vocab) {
  RETURN_IF_ERROR(vocab.Validate());
  std::unique_ptr<Tokenizer> tokenizer(new Tokenizer(std::move(vocab)));
  RETURN_IF_ERROR(tokenizer->Init());
  return tokenizer;
}

absl::Status Tokenizer::Init() {
  const int32_t n = static_cast<int32_t>(vocab_.tokens.size());
  lookup_ = std::make_unique<TokenLookup>(vocab_);
  const std::string_view pre = vocab_.pre;

  // llama.cpp's per-model defaults; the file's keys override them below.
  TokenId bos = kNoToken, eos = kNoToken, unk = kNoToken, sep = kNoToken, pad = kNoToken;
  switch (vocab_.model) {
    case TokenizerModel::kSpm:
      bos = 1, eos = 2, unk = 0;
      add_space_prefix_ = true;
      add_bos_ = true;
      break;
    case TokenizerModel::kBpe: {
      // GLM's vocabularies have no default BOS (llama.cpp's CHATGLM4).
      bos = eos = 11;
      if (OneOf(pre, {"glm4", "chatglm-bpe"})) bos = kNoToken;
      add_bos_ = OneOf(
          pre, {"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral", "tekken", "chameleon"});
      ignore_merges_ =
          OneOf(pre, {"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral", "tekken"});
      clean_spaces_ =
          !OneOf(pre, {"deepseek-llm", "deepseek-coder", "deepseek-v3", "command-r", "qwen2",
                       "deepseek-r1-qwen", "poro-chat", "viking", "tekken", "smollm", "chameleon",
                       "gpt-4o", "llama4", "seed-coder", "kimi-k2"});
      ASSIGN_OR_RETURN(std::vector<std::string> regexes, PreTokenizer::RegexesFor(pre));
      ASSIGN_OR_RETURN(pre_tokenizer_, PreTokenizer::Create(std::move(regexes)));
      ASSIGN_OR_RETURN(BpeModel bpe, BpeModel::Create(*lookup_));
      bpe_ = std::make_unique<BpeModel>(std::move(bpe));
      break;
    }
    case TokenizerModel::kWpm:
      bos = 101, unk = 100, sep = 102, pad = 0;
      add_bos_ = true;
      clean_spaces_ = true;
      lowercase_ = true;
      break;
  }
  auto resolve = [n](TokenId fallback, const std::optional<TokenId>& given) {
    if (given.has_value()) return *given;
    return fallback >= 0 && fallback < n ? fallback : kNoToken;
  };
  bos_ = resolve(bos, vocab_.bos_id);
  eos_ = resolve(eos, vocab_.eos_id);
  unk_ = resolve(unk, vocab_.unknown_id);
  sep_ = resolve(sep, vocab_.separator_id);
  pad_ = resolve(pad, vocab_.padding_id);
  add_bos_ = vocab_.add_bos.value_or(add_bos_);
  add_eos_ = vocab_.add_eos.value_or(add_eos_);
  add_space_prefix_ = vocab_.add_space_prefix.value_or(add_space_prefix_);
  lowercase_ = vocab_.lowercase.value_or(lowercase_);
  if (add_bos_ && bos_ == kNoToken) {
    return absl::InvalidArgumentError(
        "tokenizer.ggml.add_bos_token is true but there is no BOS id");
  }
  if (add_eos_ && eos_ == kNoToken) {
    return absl::InvalidArgumentError(
        "tokenizer.ggml.add_eos_token is true but there is no EOS id");
  }

  attrs_.resize(n);
  for (TokenId id = 0; id < n; ++id) attrs_[id] = AttrFromType(lookup_->Type(id));

  for (TokenId id = 0; id < n; ++id) {
    if (IsEogText(vocab_.tokens[id])) {
      eog_.insert(id);
      attrs_[id] |= kAttrControl;
    }
  }
  for (TokenId id : {eos_, resolve(kNoToken, vocab_.eot_id), resolve(kNoToken, vocab_.eom_id)}) {
    if (id != kNoToken) eog_.insert(id);
  }
  MarkupTokens();

  for (TokenId id = 0; id < n; ++id) {
    if (attrs_[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown))
      special_tokens_.push_back(id);
  }
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(), [&](TokenId a, TokenId b) {
    return vocab_.tokens[a].size() > vocab_.tokens[b].size();
  });

  pieces_.resize(n);
  for (TokenId id = 0; id < n; ++id) pieces_[id] = RenderPiece(id);
  return absl::OkStatus();
}

void Tokenizer::MarkupTokens() {
  // The markup between a harmony message's parts (which channel a message
  // is in), reasoning blocks and tool calls are text the caller sees and
  // parses, as llama.cpp keeps them for its chat parsers (its "preserved
  // tokens"), even where a vocabulary makes them control tokens (GLM-4.5,
  // Kimi-K2, DeepSeek).
  TokenId end = kNoToken;
  bool has_return = false, has_call = false;
  for (TokenId id = 0; id < static_cast<TokenId>(vocab_.tokens.size()); ++id) {
    const std::string& text = vocab_.tokens[id];
    if (OneOf(text, {"<|channel|>",
                     "<|message|>",
                     "<|start|>",
                     "<|constrain|>",
                     "<think>",
                     "</think>",
                     "<tool_call>",
                     "</tool_call>",
                     "<arg_key>",
                     "</arg_key>",
                     "<arg_value>",
                     "</arg_value>",
                     "<|tool_calls_section_begin|>",
                     "<|tool_calls_section_end|>",
                     "<|tool_call_begin|>",
                     "<|tool_call_argument_begin|>",
                     "<|tool_call_end|>",
                     "<｜tool▁calls▁begin｜>",
                     "<｜tool▁calls▁end｜>",
                     "<｜tool▁call▁begin｜>",
                     "<｜tool▁call▁end｜>",
                     "<｜tool▁sep｜>",
                     "[TOOL_CALLS]"})) {
      attrs_[id] = kAttrUserDefined;
    }
    if (!eog_.contains(id)) continue;
    has_return = has_return || text == "<|return|>";
    has_call = has_call || text == "<|call|>";
    if (text == "<|end|>") end = id;
  }
  // o200k_harmony (gpt-oss): <|end|> closes a message (the reasoning before
  // the answer), not the reply; <|return|> and <|call|> end it.
  if (has_return && has_call && end != kNoToken) {
    eog_.erase(end);
    attrs_[end] = kAttrUserDefined;
  }
}

std::string Tokenizer::RenderPiece(TokenId id) const {
  const std::string& text = vocab_.tokens[id];
  const uint32_t attr = attrs_[id];
  if (attr & (kAttrControl | kAttrUnknown | kAttrUserDefined)) return text;
  if (attr & kAttrByte) {
    // "<0xXX>"; anything else is rendered as its text.
    if (text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text[5] == '>') {
      int value = 0;
      for (char c : text.substr(3, 2)) {
        value = value * 16 + (c >= '0' && c <= '9'   ? c - '0'
                              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                              : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                     : 0);
      }
      return std::string(1, static_cast<char>(value));
    }
    return text;
  }
  if (!(attr & kAttrNormal)) return "";  // Unused / undefined tokens render as nothing.
  switch (vocab_.model) {
    case TokenizerModel::kSpm:
    case TokenizerModel::kWpm: {
      // GGUF WordPiece vocabularies mark word starts with U+2581 too.
      std::string piece = text;
      ReplaceAll(&piece, kSpmSpace, " ");
      return piece;
    }
    case TokenizerModel::kBpe: {
      std::string piece;
      for (size_t pos = 0; pos < text.size();) {
        const size_t start = pos;
        const int byte = Gpt2CharToByte(DecodeUtf8(text, &pos));
        if (byte >= 0) {
          piece.push_back(static_cast<char>(byte));
        } else {
          piece.append(text, start, pos - start);  // Not a byte symbol: keep as is.
        }
      }
      return piece;
    }
  }
  return text;
}

void Tokenizer::Partition(std::string_view text, bool parse_special,
                          std::vector<Fragment>* out) const {
  out->clear();
  if (text.empty()) return;
  out->push_back(Fragment{kNoToken, 0, text.size()});
  std::vector<Fragment> next;
  for (TokenId id : special_tokens_) {
    if (!parse_special && (attrs_[id] & (kAttrControl | kAttrUnknown))) continue;
    const std::string& literal = vocab_.tokens[id];
    next.clear();
    bool split = false;
    for (const Fragment& fragment : *out) {
      if (fragment.token != kNoToken) {
        next.push_back(fragment);
        continue;
      }
      const std::string_view raw = text.substr(fragment.offset, fragment.length);
      size_t pos = 0;
      while (true) {
        const size_t hit = raw.find(literal, pos);
        if (hit == std::string_view::npos) break;
        split = true;
        if (hit > pos) next.push_back(Fragment{kNoToken, fragment.offset + pos, hit - pos});
        next.push_back(Fragment{id, 0, 0});
        pos = hit + literal.size();
      }
      if (pos < raw.size())
        next.push_back(Fragment{kNoToken, fragment.offset + pos, raw.size() - pos});
    }
    if (split) out->swap(next);
  }
}

void Tokenizer::Encode(std::string_view text, bool add_special, bool parse_special,
                       std::vector<TokenId>* out) const {
  std::vector<Fragment> fragments;
  Partition(text, parse_special, &fragments);
  if (add_special && add_bos_) out->push_back(bos_);
  switch (vocab_.model) {
    case TokenizerModel::kSpm: {
      // A space prefix goes before the first text and after every special
      // token, as SentencePiece's add_dummy_prefix does per piece.
      bool prev_special = true;
      std::string escaped;
      for (const Fragment& fragment : fragments) {
        if (fragment.token != kNoToken) {
          out->push_back(fragment.token);
          prev_special = true;
          continue;
        }
        escaped.clear();
        if (add_space_prefix_ && prev_special) escaped.append(kSpmSpace);
        for (char c : text.substr(fragment.offset, fragment.length)) {
          if (c == ' ') {
            escaped.append(kSpmSpace);
          } else {
            escaped.push_back(c);
          }
        }
        SpmEncode(*lookup_, escaped, unk_, out);
        prev_special = false;
      }
      break;
    }
    case TokenizerModel::kBpe: {
      std::vector<std::string_view> words;
      for (const Fragment& fragment : fragments) {
        if (fragment.token != kNoToken) {
          out->push_back(fragment.token);
          continue;
        }
        const std::string clean = SanitizeUtf8(text.substr(fragment.offset, fragment.length));
        words.clear();
        pre_tokenizer_->Split(clean, &words);
        for (std::string_view word : words) bpe_->EncodeWord(word, ignore_merges_, out);
      }
      break;
    }
    case TokenizerModel::kWpm:
      for (const Fragment& fragment : fragments) {
        if (fragment.token != kNoToken) {
          out->push_back(fragment.token);
        } else {
          EncodeWordPiece(text.substr(fragment.offset, fragment.length), out);
        }
      }
      if (add_special && sep_ != kNoToken) out->push_back(sep_);
      break;
  }
  if (add_special && add_eos_) out->push_back(eos_);
}

std::vector<TokenId> Tokenizer::Encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  std::vector<TokenId> out;
  Encode(text, add_special, parse_special, &out);
  return out;
}

std::vector<TokenId> Tokenizer::EncodeChat(std::string_view rendered) const {
  std::vector<TokenId> out = Encode(rendered, /*add_special=*/true, /*parse_special=*/true);
  if (add_bos_ && out.size() >= 2 && out[0] == bos_ && out[1] == bos_) out.erase(out.begin());
  return out;
}

void Tokenizer::AppendPiece(TokenId id, bool special, std::string* out) const {
  if (id < 0 || id >= vocab_size()) return;
  if (!special && (attrs_[id] & (kAttrControl | kAttrUnknown))) return;
  out->append(pieces_[id]);
}

std::string Tokenizer::Decode(absl::Span<const TokenId> ids,
                              const DetokenizeOptions& options) const {
  if (options.remove_special && add_bos_ && !ids.empty() && ids.front() == bos_) {
    ids.remove_prefix(1);
  }
  if (options.remove_special && add_eos_ && !ids.empty() && ids.back() == eos_) {
    ids.remove_suffix(1);
  }
  std::string text;
  bool strip = options.strip_leading_space && add_space_prefix_;
  for (TokenId id : ids) {
    const size_t before = text.size();
    AppendPiece(id, options.unparse_special, &text);
    if (strip && text.size() > before) {
      if (text[before] == ' ') text.erase(before, 1);
      strip = false;
    }
  }
  if (options.clean_spaces && clean_spaces_) CleanSpaces(&text);
  return text;
}

}  // namespace waste::text
