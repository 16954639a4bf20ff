// libFuzzer target for chat rendering (daemon/text/chat_template):
// tests/fuzz/run_fuzzer.sh chat_template builds and runs it with clang;
// //tests/fuzz:chat_template_fuzzer_test replays the committed seeds.
//
// Input: a flag byte, then fields separated by 0x1F: the GGUF template text
// (only its markers matter), then role, content, role, content, ... Every
// format renders the turns (not only the detected one); checked:
//   - DetectChatFormat names a format;
//   - every turn's content appears in the prompt (Llama 3 trims it; Llama
//     2 folds a system message into the next user turn, so one with no
//     user turn after it is not rendered; Qwen keeps a reply's text after
//     its </think> only, and may drop the newlines it starts with);
//   - the prompt ends with the assistant opening when asked for;
//   - rendering is deterministic;
//   - the prompt tokenizes with special parsing, as the engine does
//     (stories260K's vocabulary from $WASTE_TEST_MODELS), to ids inside
//     the vocabulary.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "common/logging.h"
#include "daemon/text/chat_template.h"
#include "daemon/text/tokenizer.h"
#include "daemon/text/vocab_gguf.h"
#include "storage/env.h"
#include "storage/gguf.h"
#include "tests/testdata.h"

namespace waste::text {
namespace {

const Tokenizer& Stories() {
  static const Tokenizer* tokenizer = [] {
    auto gguf = storage::GgufFile::Open(storage::Env::Default(),
                                        testing::ModelPath("stories260K/stories260K.gguf"));
    WCHECK(gguf.ok()) << gguf.status();
    auto vocab = VocabFromGguf(**gguf);
    WCHECK(vocab.ok()) << vocab.status();
    auto created = Tokenizer::Create(*std::move(vocab));
    WCHECK(created.ok()) << created.status();
    return created->release();
  }();
  return *tokenizer;
}

const char* AssistantOpening(ChatFormat format) {
  switch (format) {
    case ChatFormat::kChatMl:
    case ChatFormat::kQwen:
      return "<|im_start|>assistant\n";
    case ChatFormat::kLlama3:
    case ChatFormat::kLlama31:
      return "<|start_header_id|>assistant<|end_header_id|>\n\n";
    case ChatFormat::kDeepSeek:
      return "<｜Assistant｜>";
    case ChatFormat::kPlain:
      return "Assistant:";
    case ChatFormat::kLlama2:
    case ChatFormat::kMistralInst:
    case ChatFormat::kMistralV1:
    case ChatFormat::kMistralV3:
    case ChatFormat::kMistralTekken:
    case ChatFormat::kMistralV7:
      return "";  // The prompt ends with the last [/INST].
  }
  return "";
}

void Check(ChatFormat format, const std::vector<ChatTurn>& turns, bool add_generation_prompt) {
  const std::string prompt = RenderChat(format, turns, add_generation_prompt);
  WCHECK(prompt == RenderChat(format, turns, add_generation_prompt));
  for (size_t i = 0; i < turns.size(); ++i) {
    absl::string_view content = turns[i].content;
    if (format == ChatFormat::kLlama3 || format == ChatFormat::kLlama31 ||
        format == ChatFormat::kLlama2 ||
        (format == ChatFormat::kMistralV3 && turns[i].role == "assistant")) {
      content = absl::StripAsciiWhitespace(content);
    }
    // Llama 3.1 writes a tool's result as a JSON string.
    if (format == ChatFormat::kLlama31 && (turns[i].role == "tool" || turns[i].role == "ipython")) {
      continue;
    }
    if (format == ChatFormat::kQwen && turns[i].role == "assistant") {
      if (absl::StrContains(content, "</think>")) continue;
      while (absl::ConsumePrefix(&content, "\n")) {
      }
    }
    // Mistral 7B v0.3 and Nemo: the first system text goes only into a
    // last user turn; v0.1/v0.2 put it into the first user turn.
    if ((format == ChatFormat::kMistralV3 || format == ChatFormat::kMistralTekken) && i == 0 &&
        turns[i].role == "system" &&
        (turns.size() == 1 || turns.back().role == "assistant" || turns.back().role == "tool")) {
      continue;
    }
    if ((format == ChatFormat::kMistralInst || format == ChatFormat::kMistralV1) && i == 0 &&
        turns[i].role == "system" &&
        !std::any_of(turns.begin() + 1, turns.end(),
                     [](const ChatTurn& t) { return t.role != "assistant"; })) {
      continue;
    }
    if (format == ChatFormat::kLlama2 && turns[i].role == "system") {
      bool user_after = false;
      for (size_t j = i + 1; j < turns.size(); ++j) {
        if (turns[j].role == "system") break;  // A later system message replaces it.
        user_after |= turns[j].role != "assistant";
        if (user_after) break;
      }
      if (!user_after) continue;
    }
    WCHECK(absl::StrContains(prompt, content))
        << ChatFormatName(format) << ": turn " << i << " (" << turns[i].role << ") is missing";
  }
  if (add_generation_prompt) {
    WCHECK(absl::EndsWith(prompt, AssistantOpening(format))) << ChatFormatName(format);
  }
  const Tokenizer& tokenizer = Stories();
  for (TokenId id : tokenizer.Encode(prompt, /*add_special=*/true, /*parse_special=*/true)) {
    WCHECK(id >= 0 && id < tokenizer.vocab_size()) << id;
  }
}

}  // namespace
}  // namespace waste::text

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using waste::text::ChatFormat;
  if (size == 0) return 0;
  const bool add_generation_prompt = (data[0] & 1) != 0;
  std::vector<std::string> fields;
  std::string field;
  for (size_t i = 1; i < size; ++i) {
    if (data[i] == 0x1F) {
      fields.push_back(std::move(field));
      field.clear();
    } else {
      field += static_cast<char>(data[i]);
    }
  }
  fields.push_back(std::move(field));
  const ChatFormat detected = waste::text::DetectChatFormat(fields[0]);
  WCHECK(waste::text::ChatFormatName(detected)[0] != '?');
  std::vector<waste::text::ChatTurn> turns;
  for (size_t i = 1; i + 1 < fields.size(); i += 2) turns.push_back({fields[i], fields[i + 1]});
  for (ChatFormat format :
       {ChatFormat::kPlain, ChatFormat::kChatMl, ChatFormat::kQwen, ChatFormat::kLlama3,
        ChatFormat::kLlama31, ChatFormat::kLlama2, ChatFormat::kMistralInst, ChatFormat::kMistralV1,
        ChatFormat::kMistralV3, ChatFormat::kMistralTekken, ChatFormat::kMistralV7,
        ChatFormat::kDeepSeek}) {
    waste::text::Check(format, turns, add_generation_prompt);
  }
  return 0;
}
