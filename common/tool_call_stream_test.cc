#include "common/tool_call_stream.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace waste {
namespace {

constexpr char kTools[] = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
   "properties": {"city": {"type": "string"}, "zip": {"type": "string"},
                  "days": {"type": "integer"}, "units": {"enum": ["c", "f"]}}}}},
  {"type": "function", "function": {"name": "get_time"}}])";

// Feeds `reply` in pieces of `step` bytes; returns everything handed back.
ToolCallSplitter::Parts Feed(ToolFormat format, const std::string& reply, size_t step) {
  ToolCallSplitter s(format, kTools);
  ToolCallSplitter::Parts all;
  auto take = [&all](ToolCallSplitter::Parts p) {
    all.content += p.content;
    for (ToolCall& c : p.calls) all.calls.push_back(std::move(c));
  };
  for (size_t i = 0; i < reply.size(); i += step) take(s.Add(reply.substr(i, step)));
  take(s.Finish());
  return all;
}

struct Case {
  ToolFormat format;
  std::string reply, content;
  std::vector<ToolCall> calls;
};

// Whatever the cuts (a byte at a time included), the same content and calls.
TEST(ToolCallSplitterTest, CallsAtAnyCuts) {
  const std::vector<Case> cases = {
      // Qwen: text, then one block per call; the newlines between are not content.
      {ToolFormat::kHermes,
       "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
       "\"Paris\", \"days\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
       "\"arguments\": {}}\n</tool_call>",
       "Let me look.\n",
       {{"", "get_weather", R"({"city": "Paris", "days": 2})"}, {"", "get_time", "{}"}}},
      // Arguments as a string holding the object; none at all.
      {ToolFormat::kHermes,
       "<tool_call>{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}"
       "</tool_call><tool_call>{\"name\": \"get_time\"}</tool_call>",
       "",
       {{"", "get_weather", R"({"city": "Oslo"})"}, {"", "get_time", "{}"}}},
      // Stopped just short of the closing tag: the call is whole all the same.
      {ToolFormat::kHermes,
       "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n",
       "",
       {{"", "get_time", "{}"}}},
      // Not a call: content, markup and all; text after a call stays.
      {ToolFormat::kHermes,
       "<tool_call>not json</tool_call> then <tool",
       "<tool_call>not json</tool_call> then <tool",
       {}},
      {ToolFormat::kHermes, "a <tool> b <tool_cal", "a <tool> b <tool_cal", {}},
      {ToolFormat::kHermes, "<tool_call>{\"name\": \"get_t", "<tool_call>{\"name\": \"get_t", {}},
      // GLM: string parameters raw (even when they look like numbers), the
      // rest JSON; a value that is not JSON stays a string.
      {ToolFormat::kGlm,
       "Checking.<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>New York"
       "</arg_value>\n<arg_key>zip</arg_key>\n<arg_value>10001</arg_value>\n<arg_key>days"
       "</arg_key>\n<arg_value>3</arg_value>\n<arg_key>units</arg_key>\n<arg_value>f"
       "</arg_value>\n</tool_call>\n<tool_call>get_time\n</tool_call>",
       "Checking.",
       {{"", "get_weather", R"({"city": "New York", "zip": "10001", "days": 3, "units": "f"})"},
        {"", "get_time", "{}"}}},
      {ToolFormat::kGlm,
       "<tool_call>get_weather\n<arg_key>city</arg_key></tool_call>",
       "<tool_call>get_weather\n<arg_key>city</arg_key></tool_call>",
       {}},
      // Kimi-K2: a section of calls, each with its own id.
      {ToolFormat::kKimiK2,
       "I'll check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
       "<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|>"
       "<|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{}"
       "<|tool_call_end|><|tool_calls_section_end|>",
       "I'll check.",
       {{"functions.get_weather:0", "get_weather", R"({"city": "Paris"})"},
        {"functions.get_time:1", "get_time", "{}"}}},
      // DeepSeek-V3.1: a section of NAME<｜tool▁sep｜>ARGS calls.
      {ToolFormat::kDeepSeekV31,
       "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": "
       "\"Paris\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}"
       "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "Sure.",
       {{"", "get_weather", R"({"city": "Paris"})"}, {"", "get_time", "{}"}}},
      // Llama 3: the reply is the call (or calls), maybe after the python tag.
      {ToolFormat::kLlama3Json,
       "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 2}}",
       "",
       {{"", "get_weather", R"({"city": "Paris", "days": 2})"}}},
      {ToolFormat::kLlama3Json,
       "\n<|python_tag|>{\"name\": \"get_time\", \"parameters\": {}}; {\"type\": \"function\", "
       "\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}",
       "",
       {{"", "get_time", "{}"}, {"", "get_weather", R"({"city": "Oslo"})"}}},
      // Mistral Nemo: text, then [TOOL_CALLS] and an array of calls with ids.
      {ToolFormat::kMistral,
       "Checking. [TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, "
       "\"id\": \"a1b2c3d4e\"}, {\"name\": \"get_time\", \"arguments\": {}}]",
       "Checking. ",
       {{"a1b2c3d4e", "get_weather", R"({"city": "Paris"})"}, {"", "get_time", "{}"}}},
      {ToolFormat::kMistral,
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"ci",
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"ci",
       {}},
      {ToolFormat::kMistral, "a [TOOL_CALL b", "a [TOOL_CALL b", {}},
      // Mistral 7B v0.3 writes a space before the array.
      {ToolFormat::kMistral,
       "[TOOL_CALLS] [{\"name\": \"get_time\", \"arguments\": {}, \"id\": \"a1b2c3d4e\"}]",
       "",
       {{"a1b2c3d4e", "get_time", "{}"}}},
      // Not calls: an answer that is JSON, text, a call with more after it,
      // a call cut short: all content, as written.
      {ToolFormat::kLlama3Json, " {\"answer\": 42}", " {\"answer\": 42}", {}},
      {ToolFormat::kLlama3Json, "The {\"name\": 1}", "The {\"name\": 1}", {}},
      {ToolFormat::kLlama3Json,
       "{\"name\": \"get_time\", \"parameters\": {}} and more",
       "{\"name\": \"get_time\", \"parameters\": {}} and more",
       {}},
      {ToolFormat::kLlama3Json,
       "<|python_tag|>{\"name\": \"get_t",
       "<|python_tag|>{\"name\": \"get_t",
       {}},
      {ToolFormat::kLlama3Json, "<|python", "<|python", {}},
      // Without tools nothing is taken out; harmony's calls are taken out
      // before (with its reasoning).
      {ToolFormat::kHarmony,
       "<tool_call>{\"name\": \"get_time\"}</tool_call>",
       "<tool_call>{\"name\": \"get_time\"}</tool_call>",
       {}},
      {ToolFormat::kNone,
       "<tool_call>{\"name\": \"get_time\"}</tool_call>",
       "<tool_call>{\"name\": \"get_time\"}</tool_call>",
       {}},
  };
  for (const Case& c : cases) {
    for (size_t step : {1, 2, 3, 5, 7, 16, 1000}) {
      const ToolCallSplitter::Parts got = Feed(c.format, c.reply, step);
      EXPECT_EQ(got.content, c.content) << c.reply << " step " << step;
      ASSERT_EQ(got.calls.size(), c.calls.size()) << c.reply << " step " << step;
      for (size_t i = 0; i < c.calls.size(); ++i) {
        EXPECT_EQ(got.calls[i].id, c.calls[i].id) << c.reply;
        EXPECT_EQ(got.calls[i].name, c.calls[i].name) << c.reply;
        EXPECT_EQ(got.calls[i].arguments, c.calls[i].arguments) << c.reply;
      }
    }
  }
}

// Llama 3: a reply is held back only until its first key says whether it
// is a call.
TEST(ToolCallSplitterTest, Llama3ContentIsNotHeldBack) {
  ToolCallSplitter text(ToolFormat::kLlama3Json, kTools);
  EXPECT_EQ(text.Add("  ").content, "");
  EXPECT_EQ(text.Add("{ \"ans").content, "");
  EXPECT_EQ(text.Add("wer\": ").content, "  { \"answer\": ");
  EXPECT_EQ(text.Add("42}").content, "42}");
  ToolCallSplitter call(ToolFormat::kLlama3Json, kTools);
  EXPECT_EQ(call.Add("{\"name\": \"get_time\", ").content, "");
  EXPECT_EQ(call.Add("\"parameters\": {}}").calls.size(), 0u);
  ToolCallSplitter::Parts end = call.Finish();
  EXPECT_EQ(end.content, "");
  ASSERT_EQ(end.calls.size(), 1u);
  EXPECT_EQ(end.calls[0].name, "get_time");
}

// Content streams: nothing is held back but what may be a marker.
TEST(ToolCallSplitterTest, ContentIsNotHeldBack) {
  ToolCallSplitter s(ToolFormat::kHermes, kTools);
  EXPECT_EQ(s.Add("Hello, ").content, "Hello, ");
  EXPECT_EQ(s.Add("wor<").content, "wor");
  EXPECT_EQ(s.Add("ld> <tool_").content, "<ld> ");
  ToolCallSplitter::Parts call = s.Add("call>{\"name\": \"get_time\"}</tool_call>");
  EXPECT_EQ(call.content, "");
  ASSERT_EQ(call.calls.size(), 1u);
  EXPECT_EQ(call.calls[0].name, "get_time");
}

// A whole reply's calls: not those in its reasoning, nor one cut short.
TEST(ToolCallSplitterTest, ReplyToolCalls) {
  const std::vector<ToolCall> calls = ReplyToolCalls(
      "<think>maybe <tool_call>{\"name\": \"get_time\"}</tool_call></think>Sure."
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>",
      false, ToolFormat::kHermes, kTools);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].name, "get_weather");
  EXPECT_EQ(calls[0].arguments, R"({"city": "Oslo"})");
  // The prompt opened the reasoning: it ends at </think>.
  EXPECT_EQ(ReplyToolCalls("r</think>{\"name\": \"get_time\", \"parameters\": {}}", true,
                           ToolFormat::kLlama3Json, kTools)
                .size(),
            1u);
  // gpt-oss's, from its messages to functions.NAME (the reply ends at the
  // <|call|> token, which is not text); a call cut short is none.
  const std::vector<ToolCall> harmony = ReplyToolCalls(
      "<|channel|>analysis<|message|>Need time.<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.get_time <|constrain|>json<|message|>{}",
      false, ToolFormat::kHarmony, kTools);
  ASSERT_EQ(harmony.size(), 1u);
  EXPECT_EQ(harmony[0].name, "get_time");
  EXPECT_TRUE(ReplyToolCalls("<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"ci", false,
                             ToolFormat::kHermes, kTools)
                  .empty());
  EXPECT_TRUE(ReplyToolCalls("<tool_call>{\"name\": \"get_time\"}</tool_call>", false,
                             ToolFormat::kNone, kTools)
                  .empty());
}

TEST(ToolCallSplitterTest, FormatNames) {
  for (ToolFormat f :
       {ToolFormat::kHermes, ToolFormat::kGlm, ToolFormat::kKimiK2, ToolFormat::kHarmony,
        ToolFormat::kDeepSeekV31, ToolFormat::kLlama3Json, ToolFormat::kMistral}) {
    EXPECT_EQ(ParseToolFormat(ToolFormatName(f)), f);
  }
  EXPECT_EQ(ParseToolFormat(""), ToolFormat::kNone);
  EXPECT_EQ(ParseToolFormat("json"), ToolFormat::kNone);
}

}  // namespace
}  // namespace waste
