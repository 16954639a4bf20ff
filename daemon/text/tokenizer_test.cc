// Tokenizer behaviour on small hand-built vocabularies (no files needed).
// The real-vocabulary vectors are in vocab_vectors_test.cc.
#include "daemon/text/tokenizer.h"

#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

namespace waste::text {
namespace {

constexpr char kSp[] = "\xE2\x96\x81";  // U+2581

std::string Sp(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == ' ') {
      out += kSp;
    } else {
      out += c;
    }
  }
  return out;
}

// Llama-style: <unk> <s> </s>, 256 byte tokens, then pieces with scores.
Vocab TinySpmVocab() {
  Vocab v;
  v.model = TokenizerModel::kSpm;
  auto add = [&](std::string text, float score, TokenType type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.token_types.push_back(type);
  };
  add("<unk>", 0, TokenType::kUnknown);
  add("<s>", 0, TokenType::kControl);
  add("</s>", 0, TokenType::kControl);
  for (int b = 0; b < 256; ++b) add(absl::StrFormat("<0x%02X>", b), 0, TokenType::kByte);
  // Ids 259.. ; higher score merges first.
  const std::vector<std::pair<std::string, float>> pieces = {
      {Sp(" "), -1},     {"h", -2},           {"e", -2},          {"l", -2},      {"o", -2},
      {"w", -2},         {"r", -2},           {"d", -2},          {"ll", -3},     {Sp(" h"), -4},
      {Sp(" he"), -5},   {"llo", -6},         {Sp(" hello"), -7}, {Sp(" w"), -8}, {"or", -9},
      {Sp(" wor"), -10}, {Sp(" world"), -11}, {"ld", -12},        {"<tag>", 0},
  };
  for (const auto& [text, score] : pieces) add(text, score, TokenType::kNormal);
  v.token_types.back() = TokenType::kUserDefined;  // "<tag>"
  return v;
}

TEST(SpmTokenizerTest, EncodesWithSpacePrefixAndMerges) {
  auto tok = Tokenizer::Create(TinySpmVocab());
  ASSERT_TRUE(tok.ok()) << tok.status();
  const Tokenizer& t = **tok;
  EXPECT_EQ(t.bos(), 1);
  EXPECT_EQ(t.eos(), 2);
  EXPECT_TRUE(t.add_bos());
  EXPECT_TRUE(t.add_space_prefix());

  const std::vector<TokenId> ids = t.Encode("hello world");
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(t.vocab().tokens[ids[0]], Sp(" hello"));
  EXPECT_EQ(t.vocab().tokens[ids[1]], Sp(" world"));
  EXPECT_EQ(t.Decode(ids), "hello world");

  const std::vector<TokenId> with_bos = t.Encode("hello", /*add_special=*/true);
  ASSERT_EQ(with_bos.size(), 2u);
  EXPECT_EQ(with_bos[0], 1);
  DetokenizeOptions keep_bos;
  keep_bos.unparse_special = true;
  // A rendered BOS is the first piece, so the prefix space stays (as in llama.cpp).
  EXPECT_EQ(t.Decode(with_bos, keep_bos), "<s> hello");
  EXPECT_EQ(t.Decode(with_bos), "hello");
}

TEST(SpmTokenizerTest, ByteFallbackAndRoundTrip) {
  auto tok = Tokenizer::Create(TinySpmVocab());
  ASSERT_TRUE(tok.ok());
  const Tokenizer& t = **tok;
  // "é" has no token: its two UTF-8 bytes become <0xC3> <0xA9>.
  const std::vector<TokenId> ids = t.Encode("h\xC3\xA9");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(t.vocab().tokens[ids[0]], Sp(" h"));
  EXPECT_EQ(t.vocab().tokens[ids[1]], "<0xC3>");
  EXPECT_EQ(t.vocab().tokens[ids[2]], "<0xA9>");
  EXPECT_EQ(t.Piece(ids[1]), "\xC3");
  EXPECT_EQ(t.Decode(ids), "h\xC3\xA9");
  // Leading spaces survive the round trip (only the added prefix is dropped).
  EXPECT_EQ(t.Decode(t.Encode("  hello")), "  hello");
  EXPECT_TRUE(t.Encode("").empty());
}

TEST(SpmTokenizerTest, SpecialTokens) {
  auto tok = Tokenizer::Create(TinySpmVocab());
  ASSERT_TRUE(tok.ok());
  const Tokenizer& t = **tok;
  // parse_special splits "</s>" out; otherwise it is ordinary text.
  const std::vector<TokenId> parsed = t.Encode("hello</s>", false, /*parse_special=*/true);
  ASSERT_EQ(parsed.size(), 2u);
  EXPECT_EQ(parsed[1], 2);
  const std::vector<TokenId> plain = t.Encode("hello</s>", false, false);
  EXPECT_GT(plain.size(), 2u);
  EXPECT_EQ(t.Decode(plain), "hello</s>");
  // User-defined tokens are always split out, and the text after them gets
  // a fresh space prefix.
  const std::vector<TokenId> user = t.Encode("<tag>hello");
  ASSERT_EQ(user.size(), 2u);
  EXPECT_EQ(t.vocab().tokens[user[0]], "<tag>");
  EXPECT_EQ(t.vocab().tokens[user[1]], Sp(" hello"));
  // Control tokens render as nothing unless asked.
  EXPECT_EQ(t.Decode(parsed), "hello");
  EXPECT_TRUE(t.IsEog(2));
  EXPECT_FALSE(t.IsEog(1));
}

std::string G(std::string_view s) {  // Spell text in GPT-2 byte symbols.
  std::string out;
  for (char c : s) {
    if (c == ' ') {
      out += "\xC4\xA0";
    } else if (c == '\n') {
      out += "\xC4\x8A";
    } else {
      out += c;
    }
  }
  return out;
}

TEST(BpeTokenizerTest, MergesByRankAndDecodesBytes) {
  Vocab v;
  v.model = TokenizerModel::kBpe;
  v.pre = "gpt-2";
  // Single-byte symbols for printable ASCII plus space and newline.
  for (int c = 0x21; c < 0x7F; ++c) v.tokens.push_back(std::string(1, static_cast<char>(c)));
  v.tokens.push_back(G(" "));
  v.tokens.push_back(G("\n"));
  v.merges = {"h e",          "l l", "he ll", "hell o",         G(" ") + " w",
              G(" w") + " o", "r l", "rl d",  G(" wo") + " rld"};
  for (const std::string& m : v.merges) {
    std::string joined = m;
    joined.erase(joined.find(' ', 1), 1);
    v.tokens.push_back(joined);
  }
  v.tokens.push_back("<|endoftext|>");
  v.token_types.assign(v.tokens.size(), TokenType::kNormal);
  v.token_types.back() = TokenType::kControl;
  v.eos_id = v.bos_id = static_cast<TokenId>(v.tokens.size() - 1);

  auto tok = Tokenizer::Create(std::move(v));
  ASSERT_TRUE(tok.ok()) << tok.status();
  const Tokenizer& t = **tok;
  EXPECT_FALSE(t.add_bos());
  EXPECT_FALSE(t.add_space_prefix());

  const std::vector<TokenId> ids = t.Encode("hello world\n");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(t.vocab().tokens[ids[0]], "hello");
  EXPECT_EQ(t.vocab().tokens[ids[1]], G(" world"));
  EXPECT_EQ(t.vocab().tokens[ids[2]], G("\n"));
  EXPECT_EQ(t.Piece(ids[1]), " world");
  EXPECT_EQ(t.Decode(ids), "hello world\n");

  const TokenId eot = t.vocab_size() - 1;
  const std::vector<TokenId> special = t.Encode("hi<|endoftext|>", false, true);
  ASSERT_EQ(special.size(), 3u);
  EXPECT_EQ(special[2], eot);
  EXPECT_TRUE(t.IsEog(eot));

  // clean_spaces (gpt-2 default) removes " ," and " 's".
  EXPECT_EQ(t.Decode(t.Encode("a , b 's")), "a, b's");
  DetokenizeOptions raw;
  raw.clean_spaces = false;
  EXPECT_EQ(t.Decode(t.Encode("a , b 's"), raw), "a , b 's");
}

// gpt-oss's o200k_harmony markup, as llama.cpp takes it: <|return|> and
// <|call|> end a reply, <|end|> only closes a message (the analysis before
// the answer), and the markup between a message's parts is shown. Without
// <|return|> and <|call|> (Phi-3's <|end|>) <|end|> ends a reply.
TEST(TokenizerTest, HarmonyMarkup) {
  auto vocab = [](bool harmony) {
    Vocab v;
    v.model = TokenizerModel::kBpe;
    v.pre = "gpt-4o";
    for (int c = 0x21; c < 0x7F; ++c) v.tokens.push_back(std::string(1, static_cast<char>(c)));
    v.token_types.assign(v.tokens.size(), TokenType::kNormal);
    std::vector<std::string> markup = {"<|start|>", "<|channel|>", "<|message|>", "<|end|>"};
    if (harmony) markup.insert(markup.end(), {"<|return|>", "<|call|>"});
    for (const std::string& m : markup) {
      v.tokens.push_back(m);
      v.token_types.push_back(TokenType::kControl);
    }
    return v;
  };
  auto tok = Tokenizer::Create(vocab(true));
  ASSERT_TRUE(tok.ok()) << tok.status();
  const Tokenizer& t = **tok;
  const std::vector<TokenId> ids =
      t.Encode("<|start|>a<|channel|>b<|message|>c<|end|>d<|return|><|call|>", false, true);
  ASSERT_EQ(ids.size(), 10u);
  EXPECT_FALSE(t.IsEog(ids[0]));
  EXPECT_FALSE(t.IsEog(ids[6]));  // <|end|>
  EXPECT_TRUE(t.IsEog(ids[8]));   // <|return|>
  EXPECT_TRUE(t.IsEog(ids[9]));   // <|call|>
  EXPECT_EQ(t.Decode(std::vector<TokenId>(ids.begin(), ids.begin() + 8)),
            "<|start|>a<|channel|>b<|message|>c<|end|>d");

  auto phi = Tokenizer::Create(vocab(false));
  ASSERT_TRUE(phi.ok()) << phi.status();
  const std::vector<TokenId> end = (*phi)->Encode("<|end|>", false, true);
  ASSERT_EQ(end.size(), 1u);
  EXPECT_TRUE((*phi)->IsEog(end[0]));
}

// Markup a reply's reader parses is text even where the vocabulary makes it
// control tokens (Kimi-K2's tool calls, GLM's <think> and <tool_call>,
// Mistral's [TOOL_CALLS]), as
// llama.cpp preserves it; other control tokens are still not shown.
TEST(TokenizerTest, ToolCallAndReasoningMarkupIsText) {
  Vocab v;
  v.model = TokenizerModel::kBpe;
  v.pre = "kimi-k2";
  for (int c = 0x21; c < 0x7F; ++c) v.tokens.push_back(std::string(1, static_cast<char>(c)));
  v.token_types.assign(v.tokens.size(), TokenType::kNormal);
  for (const char* special : {"<|tool_calls_section_begin|>",
                              "<|tool_call_begin|>",
                              "<|tool_call_argument_begin|>",
                              "<|tool_call_end|>",
                              "<|tool_calls_section_end|>",
                              "<think>",
                              "</think>",
                              "<tool_call>",
                              "</tool_call>",
                              "<arg_key>",
                              "</arg_key>",
                              "<arg_value>",
                              "</arg_value>",
                              "<｜tool▁calls▁begin｜>",
                              "<｜tool▁call▁begin｜>",
                              "<｜tool▁sep｜>",
                              "<｜tool▁call▁end｜>",
                              "<｜tool▁calls▁end｜>",
                              "[TOOL_CALLS]",
                              "<|im_end|>"}) {
    v.tokens.push_back(special);
    v.token_types.push_back(TokenType::kControl);
  }
  auto tok = Tokenizer::Create(v);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::string reply =
      "<think>x</think><|tool_calls_section_begin|><|tool_call_begin|>f:0"
      "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>"
      "<tool_call>g<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>"
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>h<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
      "<｜tool▁calls▁end｜>[TOOL_CALLS][]";
  const std::vector<TokenId> ids = (*tok)->Encode(reply + "<|im_end|>", false, true);
  ASSERT_EQ(ids.size(), 34u);
  EXPECT_EQ((*tok)->Decode(ids), reply);
}

// GLM's template writes [gMASK]<sop> itself; a file that also asks for a
// [gMASK] BOS gets it once. Without a BOS id, glm4's vocabulary has none.
TEST(TokenizerTest, ChatPromptThatWritesItsBosGetsOne) {
  Vocab v;
  v.model = TokenizerModel::kBpe;
  v.pre = "glm4";
  for (int c = 0x21; c < 0x7F; ++c) v.tokens.push_back(std::string(1, static_cast<char>(c)));
  v.token_types.assign(v.tokens.size(), TokenType::kNormal);
  for (const char* special : {"[gMASK]", "<sop>", "<|user|>"}) {
    v.tokens.push_back(special);
    v.token_types.push_back(TokenType::kControl);
  }
  const TokenId gmask = static_cast<TokenId>(v.tokens.size()) - 3;
  {
    auto plain = Tokenizer::Create(v);
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_EQ((*plain)->bos(), kNoToken);
    EXPECT_EQ((*plain)->EncodeChat("[gMASK]<sop><|user|>").size(), 3u);
  }
  v.bos_id = gmask;
  v.add_bos = true;
  auto tok = Tokenizer::Create(v);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::vector<TokenId> ids = (*tok)->EncodeChat("[gMASK]<sop><|user|>hi");
  ASSERT_EQ(ids.size(), 5u);
  EXPECT_EQ(ids[0], gmask);
  EXPECT_NE(ids[1], gmask);
  // Other prompts still get the BOS the file asks for.
  EXPECT_EQ((*tok)->EncodeChat("<|user|>").front(), gmask);
  EXPECT_EQ((*tok)->EncodeChat("<|user|>").size(), 2u);
}

TEST(TokenizerTest, RejectsBadVocab) {
  Vocab empty;
  EXPECT_FALSE(Tokenizer::Create(empty).ok());

  Vocab dup = TinySpmVocab();
  dup.tokens[5] = dup.tokens[6];
  EXPECT_EQ(Tokenizer::Create(dup).status().code(), absl::StatusCode::kInvalidArgument);

  Vocab scores = TinySpmVocab();
  scores.scores.pop_back();
  EXPECT_EQ(Tokenizer::Create(scores).status().code(), absl::StatusCode::kInvalidArgument);

  Vocab pre;
  pre.model = TokenizerModel::kBpe;
  pre.pre = "nonexistent";
  pre.tokens = {"a", "b"};
  EXPECT_EQ(Tokenizer::Create(pre).status().code(), absl::StatusCode::kNotFound);

  Vocab merge;
  merge.model = TokenizerModel::kBpe;
  merge.tokens = {"a", "b"};
  merge.merges = {"ab"};
  EXPECT_EQ(Tokenizer::Create(merge).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace waste::text
