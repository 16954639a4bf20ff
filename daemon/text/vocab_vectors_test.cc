// llama.cpp's tokenizer test vectors (models/ggml-vocab-*.gguf.{inp,out})
// on the real vocabularies, plus stories260K's tokenizer against its golden
// greedy output. Needs WASTE_TEST_MODELS.
#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "daemon/text/tokenizer.h"
#include "daemon/text/vocab_gguf.h"
#include "gtest/gtest.h"
#include "storage/env.h"
#include "storage/gguf.h"
#include "tests/testdata.h"

namespace waste::text {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool FileExists(const std::string& path) { return std::ifstream(path).good(); }

std::unique_ptr<Tokenizer> LoadTokenizer(const std::string& path) {
  auto gguf = storage::GgufFile::Open(storage::Env::Default(), path);
  EXPECT_TRUE(gguf.ok()) << gguf.status();
  if (!gguf.ok()) return nullptr;
  auto vocab = VocabFromGguf(**gguf);
  EXPECT_TRUE(vocab.ok()) << vocab.status();
  if (!vocab.ok()) return nullptr;
  auto tokenizer = Tokenizer::Create(*std::move(vocab));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  if (!tokenizer.ok()) return nullptr;
  return *std::move(tokenizer);
}

// (Debian's Abseil has its own string_view, hence absl::string_view here.)
std::vector<TokenId> ParseIds(absl::string_view line, char sep) {
  std::vector<TokenId> ids;
  for (absl::string_view field : absl::StrSplit(line, sep, absl::SkipWhitespace())) {
    int id = 0;
    EXPECT_TRUE(absl::SimpleAtoi(field, &id)) << field;
    ids.push_back(id);
  }
  return ids;
}

std::string Escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out;
}

class VocabVectorsTest : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabVectorsTest, MatchesLlamaCppVectors) {
  const std::string base = testing::ModelsDir() + "/llama.cpp-vocab/ggml-vocab-" + GetParam();
  const std::string gguf_path = base + ".gguf";
  if (!FileExists(gguf_path)) {
    GTEST_SKIP() << "no vocab file " << gguf_path << " (only its vectors are shipped); skipping";
  }
  std::unique_ptr<Tokenizer> tokenizer = LoadTokenizer(gguf_path);
  ASSERT_NE(tokenizer, nullptr);

  std::vector<std::string> inputs =
      absl::StrSplit(ReadFile(base + ".gguf.inp"), "\n__ggml_vocab_test__\n");
  ASSERT_FALSE(inputs.empty());
  ASSERT_TRUE(inputs.back().empty());  // Every input is followed by the separator.
  inputs.pop_back();
  const std::vector<std::string> expected_lines =
      absl::StrSplit(ReadFile(base + ".gguf.out"), '\n');
  ASSERT_GE(expected_lines.size(), inputs.size());

  const bool round_trips = tokenizer->model() != TokenizerModel::kWpm;
  DetokenizeOptions raw;
  raw.clean_spaces = false;
  int passed = 0, round_tripped = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<TokenId> expected = ParseIds(expected_lines[i], ' ');
    const std::vector<TokenId> got = tokenizer->Encode(inputs[i], false, false);
    EXPECT_EQ(got, expected) << GetParam() << " vector " << i << " '" << Escape(inputs[i])
                             << "'\n  want: " << absl::StrJoin(expected, " ")
                             << "\n  got:  " << absl::StrJoin(got, " ");
    passed += got == expected;
    if (round_trips) {
      const std::string decoded = tokenizer->Decode(got, raw);
      EXPECT_EQ(decoded, inputs[i]) << GetParam() << " round trip of vector " << i;
      round_tripped += decoded == inputs[i];
    }
  }
  printf("%s: %d/%zu vectors match, %d round-trip%s\n", GetParam(), passed, inputs.size(),
         round_tripped, round_trips ? "" : " (WordPiece: not checked)");
}

INSTANTIATE_TEST_SUITE_P(LlamaCpp, VocabVectorsTest,
                         ::testing::Values("llama-spm", "gpt-2", "deepseek-llm", "deepseek-coder",
                                           "falcon", "bert-bge", "qwen2", "llama-bpe"));

TEST(Stories260KTest, TokenizesAndDecodesGolden) {
  std::unique_ptr<Tokenizer> tokenizer =
      LoadTokenizer(testing::ModelPath("stories260K/stories260K.gguf"));
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->vocab_size(), 512);
  EXPECT_EQ(tokenizer->bos(), 1);
  EXPECT_EQ(tokenizer->eos(), 2);
  EXPECT_TRUE(tokenizer->add_bos());

  const std::vector<TokenId> ids = tokenizer->Encode("Once upon a time", true);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(tokenizer->vocab().tokens[ids[1]],
            "\xE2\x96\x81"
            "Once");
  EXPECT_LE(ids.size(), 6u) << absl::StrJoin(ids, " ");
  DetokenizeOptions options;
  options.remove_special = true;
  EXPECT_EQ(tokenizer->Decode(ids, options), "Once upon a time");

  std::string ids_text;
  for (absl::string_view line : absl::StrSplit(
           ReadFile(testing::ModelPath("stories260K/golden/greedy_from_bos_256.ids")), '\n')) {
    if (!line.empty() && line[0] != '#') ids_text += std::string(line);
  }
  const std::vector<TokenId> golden = ParseIds(ids_text, ',');
  ASSERT_EQ(golden.size(), 256u);
  EXPECT_EQ(tokenizer->Decode(golden),
            ReadFile(testing::ModelPath("stories260K/golden/greedy_from_bos_256.txt")));
}

}  // namespace
}  // namespace waste::text
