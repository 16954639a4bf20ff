#include "daemon/text/chat_template.h"

#include "gtest/gtest.h"

namespace waste::text {
namespace {

TEST(ChatTemplateTest, DetectsFamiliesFromTemplateMarkers) {
  EXPECT_EQ(DetectChatFormat("{% for m in messages %}<|im_start|>{{m.role}}"), ChatFormat::kChatMl);
  EXPECT_EQ(DetectChatFormat("<|start_header_id|>' + message['role']"), ChatFormat::kLlama3);
  EXPECT_EQ(DetectChatFormat("{{ '[INST] ' + content }}"), ChatFormat::kLlama2);
  EXPECT_EQ(DetectChatFormat(""), ChatFormat::kPlain);
}

TEST(ChatTemplateTest, RendersChatMlWithGenerationPrompt) {
  std::vector<ChatTurn> turns = {{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(RenderChat(ChatFormat::kChatMl, turns, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, RendersLlama3AndLlama2) {
  std::vector<ChatTurn> turns = {{"user", "Hi"}};
  EXPECT_EQ(RenderChat(ChatFormat::kLlama3, turns, true),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  std::vector<ChatTurn> two = {{"system", "S"}, {"user", "A"}, {"assistant", "B"}, {"user", "C"}};
  EXPECT_EQ(RenderChat(ChatFormat::kLlama2, two, true),
            "[INST] <<SYS>>\nS\n<</SYS>>\n\nA [/INST] B</s><s>[INST] C [/INST]");
}

TEST(ChatTemplateTest, PlainTranscriptForModelsWithoutTemplate) {
  EXPECT_EQ(RenderChat(ChatFormat::kPlain, {{"user", "Hello"}}, true), "User: Hello\nAssistant:");
}

}  // namespace
}  // namespace waste::text
