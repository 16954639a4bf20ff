#include "daemon/text/chat_template.h"

#include "gtest/gtest.h"

namespace waste::text {
namespace {

TEST(ChatTemplateTest, DetectsFamiliesFromTemplateMarkers) {
  EXPECT_EQ(DetectChatFormat("{% for m in messages %}<|im_start|>{{m.role}}"), ChatFormat::kChatMl);
  EXPECT_EQ(DetectChatFormat("<|start_header_id|>' + message['role']"), ChatFormat::kLlama3);
  EXPECT_EQ(DetectChatFormat("{{ '[INST] ' + content }}"), ChatFormat::kLlama2);
  EXPECT_EQ(DetectChatFormat(""), ChatFormat::kPlain);
  // Kimi-K2's template ends turns with <|im_end|> too: not ChatML.
  EXPECT_EQ(DetectChatFormat("{%- if add_generation_prompt -%}<|im_assistant|>assistant"
                             "<|im_middle|>{%- endif -%}{{'<|im_end|>'}}"),
            ChatFormat::kKimiK2);
}

// As llama.cpp renders moonshotai/Kimi-K2-Instruct's template.
TEST(ChatTemplateTest, RendersKimiK2) {
  std::vector<ChatTurn> turns = {
      {"system", "S"}, {"user", "Q"}, {"assistant", "A"}, {"tool", "T"}, {"user", "Q2"}};
  EXPECT_EQ(RenderChat(ChatFormat::kKimiK2, turns, true),
            "<|im_system|>system<|im_middle|>S<|im_end|>"
            "<|im_user|>user<|im_middle|>Q<|im_end|>"
            "<|im_assistant|>assistant<|im_middle|>A<|im_end|>"
            "<|im_system|>tool<|im_middle|>T<|im_end|>"
            "<|im_user|>user<|im_middle|>Q2<|im_end|>"
            "<|im_assistant|>assistant<|im_middle|>");
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
