#include "daemon/text/chat_template.h"

#include "daemon/text/chat_tools.h"
#include "gtest/gtest.h"

namespace waste::text {
namespace {

TEST(ChatTemplateTest, DetectsFamiliesFromTemplateMarkers) {
  EXPECT_EQ(DetectChatFormat("{% for m in messages %}<|im_start|>{{m.role}}"), ChatFormat::kChatMl);
  EXPECT_EQ(DetectChatFormat("<|start_header_id|>' + message['role']"), ChatFormat::kLlama3);
  EXPECT_EQ(DetectChatFormat("{{ bos_token + '[INST] ' + content }}"), ChatFormat::kLlama2);
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

// gpt-oss: the system message always, a system turn as the developer's
// instructions, earlier replies on the final channel; the reply opens as
// <|start|>assistant (the model names its channel). Its template also holds
// <|start|> and <|im_start|>-free markers: harmony, not ChatML.
TEST(ChatTemplateTest, RendersHarmony) {
  EXPECT_EQ(DetectChatFormat("{{- \"<|start|>assistant<|channel|>final<|message|>\" }}"),
            ChatFormat::kHarmony);
  std::vector<ChatTurn> turns = {
      {"system", "S"}, {"user", "Q"}, {"assistant", "A"}, {"user", "Q2"}};
  EXPECT_EQ(RenderChat(ChatFormat::kHarmony, turns, true, "2026-12-03"),
            "<|start|>system<|message|>You are ChatGPT, a large language model trained by "
            "OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: 2026-12-03\n\nReasoning: "
            "medium\n\n# Valid channels: analysis, commentary, final. Channel must be included "
            "for every message.<|end|>"
            "<|start|>developer<|message|># Instructions\n\nS\n\n<|end|>"
            "<|start|>user<|message|>Q<|end|>"
            "<|start|>assistant<|channel|>final<|message|>A<|end|>"
            "<|start|>user<|message|>Q2<|end|>"
            "<|start|>assistant");
  // Without a date: today's, in the same place.
  const std::string today = RenderChat(ChatFormat::kHarmony, {{"user", "Q"}}, false);
  const size_t at = today.find("Current date: ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(today.substr(at + 14 + 10, 2), "\n\n");
  EXPECT_EQ(today.substr(at + 14, 2), "20");
}

// As Jinja renders GLM-4.5's template (trim_blocks, lstrip_blocks, as
// transformers and llama.cpp do): reasoning kept only after the last user
// turn, stripped; tool results after one <|observation|>.
TEST(ChatTemplateTest, RendersGlm) {
  EXPECT_EQ(DetectChatFormat("[gMASK]<sop>\n{%- if tools -%}<|system|>"), ChatFormat::kGlm);
  std::vector<ChatTurn> turns = {{"system", "S"},
                                 {"user", "Q"},
                                 {"assistant", "<think>r1</think>\nA"},
                                 {"user", "Q2"},
                                 {"assistant", "<think> r2 </think>\n\nB "},
                                 {"tool", "T1"},
                                 {"tool", "T2"}};
  EXPECT_EQ(RenderChat(ChatFormat::kGlm, turns, true),
            "[gMASK]<sop><|system|>\nS<|user|>\nQ<|assistant|>\n<think></think>\nA"
            "<|user|>\nQ2<|assistant|>\n<think>r2</think>\nB<|observation|>\n<tool_response>\n"
            "T1\n</tool_response>\n<tool_response>\nT2\n</tool_response><|assistant|>");
  EXPECT_EQ(RenderChat(ChatFormat::kGlm, {{"user", "Hi"}, {"assistant", "plain"}}, false),
            "[gMASK]<sop><|user|>\nHi<|assistant|>\n<think></think>\nplain");
}

// enable_thinking = false as Qwen3's and GLM-4.5's templates write it (the
// GLM lines checked against Jinja); harmony's reasoning effort.
TEST(ChatTemplateTest, ThinkingSwitchAndReasoningEffort) {
  EXPECT_TRUE(HasThinkingSwitch("{%- if enable_thinking is defined and enable_thinking is false"));
  EXPECT_FALSE(HasThinkingSwitch("{{'<|im_start|>' + message['role']}}"));
  const ChatOptions off = {.thinking = false};
  EXPECT_EQ(RenderChat(ChatFormat::kChatMl, {{"user", "Hi"}}, off),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(RenderChat(ChatFormat::kGlm,
                       {{"user", "Hi"}, {"assistant", "A"}, {"user", "More /nothink"}}, off),
            "[gMASK]<sop><|user|>\nHi/nothink<|assistant|>\n<think></think>\nA"
            "<|user|>\nMore /nothink<|assistant|>\n<think></think>");
  const std::string high =
      RenderChat(ChatFormat::kHarmony, {{"user", "Q"}}, {.reasoning_effort = "high"});
  EXPECT_NE(high.find("\n\nReasoning: high\n\n"), std::string::npos) << high;
}

// As Jinja renders DeepSeek-V3.1's template: system turns first, replies
// after a user turn open with </think> (reasoning dropped), after a tool's
// output not; thinking opens the reply with <think>, which leaves the
// block open; no generation prompt after a tool's output.
TEST(ChatTemplateTest, RendersDeepSeekV31) {
  const std::string tmpl =
      "{% if not thinking is defined %}{% set thinking = false %}{% endif %}"
      "{{'<｜Assistant｜></think>'}}";
  EXPECT_EQ(DetectChatFormat(tmpl), ChatFormat::kDeepSeekV31);
  EXPECT_TRUE(HasThinkingSwitch(tmpl));
  const std::vector<ChatTurn> turns = {
      {"system", "S1"}, {"user", "Q"},      {"system", "S2"}, {"assistant", "<think>r</think>A"},
      {"user", "Q2"},   {"assistant", "B"}, {"tool", "T"},    {"assistant", "C"},
      {"user", "Q3"}};
  const std::string history =
      "S1\n\nS2<｜User｜>Q<｜Assistant｜></think>A<｜end▁of▁sentence｜><｜User｜>Q2<｜Assistant｜>"
      "</think>B<｜end▁of▁sentence｜><｜tool▁output▁begin｜>T<｜tool▁output▁end｜>C<｜end▁of▁"
      "sentence｜><｜User｜>Q3";
  const std::string plain = RenderChat(ChatFormat::kDeepSeekV31, turns, ChatOptions{});
  EXPECT_EQ(plain, history + "<｜Assistant｜></think>");
  EXPECT_FALSE(PromptOpensReasoning(plain));
  const std::string thinking =
      RenderChat(ChatFormat::kDeepSeekV31, turns, ChatOptions{.thinking = true});
  EXPECT_EQ(thinking, history + "<｜Assistant｜><think>");
  EXPECT_TRUE(PromptOpensReasoning(thinking));
  EXPECT_EQ(RenderChat(ChatFormat::kDeepSeekV31, {{"user", "Q"}, {"tool", "T"}}, ChatOptions{}),
            "<｜User｜>Q<｜tool▁output▁begin｜>T<｜tool▁output▁end｜>");
}

// Mistral Nemo's template ("v3-tekken"), as Jinja renders llama.cpp's copy:
// no spaces, no BOS between turns, the system text before the last user
// turn's (and nowhere when the conversation ends with a reply).
TEST(ChatTemplateTest, RendersMistralTekken) {
  EXPECT_EQ(
      DetectChatFormat("{{- \"[AVAILABLE_TOOLS][\" }}{{- \"[INST]\" + message[\"content\"] }}"),
      ChatFormat::kMistralTekken);
  EXPECT_EQ(DetectChatFormat("[SYSTEM_PROMPT][AVAILABLE_TOOLS]{{- \"[INST]\" }}"),
            ChatFormat::kMistralV7);
  EXPECT_EQ(RenderChat(ChatFormat::kMistralTekken,
                       {{"system", "S"}, {"user", "A"}, {"assistant", "B"}, {"user", "C"}}, true),
            "[INST]A[/INST]B</s>[INST]S\n\nC[/INST]");
  EXPECT_EQ(RenderChat(ChatFormat::kMistralTekken,
                       {{"system", "S"}, {"user", "A"}, {"assistant", " B "}}, false),
            "[INST]A[/INST] B </s>");
  EXPECT_EQ(RenderChat(ChatFormat::kMistralTekken, {{"user", " Hi "}}, true), "[INST] Hi [/INST]");
  ChatTurn result{"tool", "18"};
  result.tool_call_id = "abcdefghi";
  EXPECT_EQ(RenderChat(ChatFormat::kMistralTekken,
                       {{"user", "A"}, result, {"assistant", "B"}, {"user", "C"}}, true),
            "[INST]A[/INST][TOOL_RESULTS]{\"content\": 18, \"call_id\": \"abcdefghi\"}"
            "[/TOOL_RESULTS]B</s>[INST]C[/INST]");
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
            "[INST] <<SYS>>\nS\n<</SYS>>\n\nA [/INST] B </s><s>[INST] C [/INST]");
}

// Goldens: Jinja's render of Gemma 3's template (google/gemma-3-4b-it's
// tokenizer_config.json; BOS left to the tokenizer).
TEST(ChatTemplateTest, RendersGemma) {
  EXPECT_EQ(DetectChatFormat("{{ '<start_of_turn>' + role + '\\n' }}"), ChatFormat::kGemma);
  EXPECT_STREQ(ChatFormatName(ChatFormat::kGemma), "gemma");
  EXPECT_EQ(ChatToolFormat(ChatFormat::kGemma), ToolFormat::kNone);
  const std::vector<ChatTurn> turns = {{"system", " Be brief. "},
                                       {"user", "  Hi there \n"},
                                       {"assistant", " Hello! "},
                                       {"user", "Bye"}};
  EXPECT_EQ(RenderChat(ChatFormat::kGemma, turns, true),
            "<start_of_turn>user\n Be brief. \n\nHi there<end_of_turn>\n"
            "<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(RenderChat(ChatFormat::kGemma, {{"user", "Hi"}}, false),
            "<start_of_turn>user\nHi<end_of_turn>\n");
}

TEST(ChatTemplateTest, PlainTranscriptForModelsWithoutTemplate) {
  EXPECT_EQ(RenderChat(ChatFormat::kPlain, {{"user", "Hello"}}, true), "User: Hello\nAssistant:");
}

// Tools: a conversation that offers two, calls both and answers from their
// results, rendered as Jinja renders each family's template (with
// transformers' tojson: keys in their order, ", " and ": "): the
// conversation without the tools, and what offering them inserts.
constexpr char kTools[] = R"([
 {
  "type": "function",
  "function": {
   "name": "get_weather",
   "description": "Weather now, in °C.",
   "parameters": {
    "type": "object",
    "properties": {
     "city": {
      "type": "string"
     },
     "days": {
      "type": "integer"
     }
    },
    "required": [
     "city"
    ]
   }
  }
 },
 {
  "type": "function",
  "function": {
   "name": "get_time",
   "parameters": {
    "type": "object",
    "properties": {}
   }
  }
 }
])";

std::vector<ChatTurn> ToolConversation(const std::string& id1, const std::string& id2) {
  ChatTurn reply{"assistant", "Let me look."};
  reply.tool_calls = {{id1, "get_weather", R"({"city": "Paris", "days": 2})"},
                      {id2, "get_time", "{}"}};
  ChatTurn result1{"tool", "18"}, result2{"tool", "noon"};
  result1.tool_call_id = id1;
  result2.tool_call_id = id2;
  return {{"system", "S"}, {"user", "Q"}, reply, result1, result2, {"assistant", "18 at noon."},
          {"user", "Q2"}};
}

struct ToolCase {
  ChatFormat format;
  std::string id1, id2;
  std::string rendered;  // Without the tools.
  size_t at;             // Where offering them inserts `tools`.
  std::string tools;
};

TEST(ChatTemplateTest, RendersToolsAndCalls) {
  const std::vector<ToolCase> cases = {
      // Qwen3.
      {ChatFormat::kQwen, "call_1", "call_2",
       "<|im_start|>system\nS<|im_end|>\n"
       "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"
       "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \""
       "Paris\", \"days\": 2}}\n</tool_call>\n"
       "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n"
       "</tool_call><|im_end|>\n<|im_start|>user\n"
       "<tool_response>\n18\n</tool_response>\n"
       "<tool_response>\nnoon\n</tool_response><|im_end|>\n"
       "<|im_start|>assistant\n18 at noon.<|im_end|>\n"
       "<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n",
       20,
       "\n\n# Tools\n\nYou may call one or more functions to assist with the user qu"
       "ery.\n\nYou are provided with function signatures within <tools></tools> X"
       "ML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\""
       ", \"description\": \"Weather now, in °C.\", \"parameters\": {\"type\": \"object\","
       " \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}"
       ", \"required\": [\"city\"]}}}\n{\"type\": \"function\", \"function\": {\"name\": \"get"
       "_time\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}}\n"
       "</tools>\n\nFor each function call, return a json object with function nam"
       "e and arguments within <tool_call></tool_call> XML tags:\n"
       "<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
       "</tool_call>"},
      // GLM-4.5.
      {ChatFormat::kGlm, "call_1", "call_2",
       "[gMASK]<sop><|system|>\nS<|user|>\n"
       "Q<|assistant|>\n<think></think>\n"
       "Let me look.\n<tool_call>get_weather\n"
       "<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
       "<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n"
       "</tool_call>\n<tool_call>get_time\n"
       "</tool_call><|observation|>\n<tool_response>\n"
       "18\n</tool_response>\n<tool_response>\n"
       "noon\n</tool_response><|assistant|>\n"
       "<think></think>\n18 at noon.<|user|>\n"
       "Q2<|assistant|>",
       12,
       "<|system|>\n# Tools\n\nYou may call one or more functions to assist with th"
       "e user query.\n\nYou are provided with function signatures within <tools><"
       "/tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get"
       "_weather\", \"description\": \"Weather now, in °C.\", \"parameters\": {\"type\": "
       "\"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"i"
       "nteger\"}}, \"required\": [\"city\"]}}}\n"
       "{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"ty"
       "pe\": \"object\", \"properties\": {}}}}\n"
       "</tools>\n\nFor each function call, output the function name and arguments"
       " within the following XML format:\n"
       "<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n"
       "<arg_value>{arg-value-1}</arg_value>\n"
       "<arg_key>{arg-key-2}</arg_key>\n"
       "<arg_value>{arg-value-2}</arg_value>\n"
       "...\n</tool_call>"},
      // Kimi-K2.
      {ChatFormat::kKimiK2, "functions.get_weather:0", "functions.get_time:1",
       "<|im_system|>system<|im_middle|>S<|im_end|><|im_user|>user<|im_middle|>Q"
       "<|im_end|><|im_assistant|>assistant<|im_middle|>Let me look.<|tool_calls"
       "_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_ar"
       "gument_begin|>{\"city\": \"Paris\", \"days\": 2}<|tool_call_end|><|tool_call_b"
       "egin|>functions.get_time:1<|tool_call_argument_begin|>{}<|tool_call_end|"
       "><|tool_calls_section_end|><|im_end|><|im_system|>tool<|im_middle|>## Re"
       "turn of functions.get_weather:0\n"
       "18<|im_end|><|im_system|>tool<|im_middle|>## Return of functions.get_tim"
       "e:1\nnoon<|im_end|><|im_assistant|>assistant<|im_middle|>18 at noon.<|im_"
       "end|><|im_user|>user<|im_middle|>Q2<|im_end|><|im_assistant|>assistant<|"
       "im_middle|>",
       0,
       "<|im_system|>tool_declare<|im_middle|>[{\"type\": \"function\", \"function\": "
       "{\"name\": \"get_weather\", \"description\": \"Weather now, in °C.\", \"parameter"
       "s\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\""
       ": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}, {\"type\": \"function\", \"f"
       "unction\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\", \"propert"
       "ies\": {}}}}]<|im_end|>"},
      // DeepSeek-V3.1 (its tools after the system prompt as its model card lays them out: its
      // template has no place for them).
      {ChatFormat::kDeepSeekV31, "call_1", "call_2",
       "S<｜User｜>Q<｜Assistant｜></think>Let me look.<｜tool▁calls▁begin｜><｜tool▁ca"
       "ll▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\", \"days\": 2}<｜tool▁call"
       "▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁c"
       "alls▁end｜><｜end▁of▁sentence｜><｜tool▁output▁begin｜>18<｜tool▁output▁end｜><"
       "｜tool▁output▁begin｜>noon<｜tool▁output▁end｜>18 at noon.<｜end▁of▁sentence｜"
       "><｜User｜>Q2<｜Assistant｜></think>",
       1,
       "\n\n## Tools\nYou have access to the following tools:\n"
       "\n### get_weather\nDescription: Weather now, in °C.\n"
       "\nParameters: {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\""
       "}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}\n"
       "\n### get_time\nDescription: \n\nParameters: {\"type\": \"object\", \"properties\""
       ": {}}\n\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\n"
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>tool_call_name<｜tool▁sep｜>tool_ca"
       "ll_arguments<｜tool▁call▁end｜>{additional_tool_calls}<｜tool▁calls▁end｜>\n"
       "\nWhere:\n- `tool_call_name` must be an exact match to one of the availabl"
       "e tools\n- `tool_call_arguments` must be valid JSON that strictly follows"
       " the tool's Parameters Schema\n- For multiple tool calls, chain them dire"
       "ctly without separators or spaces"},
  };
  for (const ToolCase& c : cases) {
    const std::vector<ChatTurn> turns = ToolConversation(c.id1, c.id2);
    EXPECT_EQ(RenderChat(c.format, turns, ChatOptions{}), c.rendered) << ChatFormatName(c.format);
    EXPECT_EQ(RenderChat(c.format, turns, {.tools = kTools}),
              c.rendered.substr(0, c.at) + c.tools + c.rendered.substr(c.at))
        << ChatFormatName(c.format);
  }
  EXPECT_EQ(DetectChatFormat("{{- '<|im_start|>' }}<tool_call>{{- '<|im_start|>user' }}"),
            ChatFormat::kQwen);
  // Hermes' own template gives results a tool turn: plain ChatML.
  EXPECT_EQ(DetectChatFormat("<|im_start|>tool\n<tool_call>"), ChatFormat::kChatMl);
}

// Llama 3.1/3.2/3.3, as Jinja renders Llama 3.2's template (llama.cpp's
// models/templates copy; 3.1's differs only in its fixed date): with tools
// offered, and with a call in the history only; a conversation without
// either renders as Llama 3's.
TEST(ChatTemplateTest, RendersLlama31Tools) {
  EXPECT_EQ(
      DetectChatFormat("<|start_header_id|>system<|end_header_id|>\n\n\"Environment: ipython"),
      ChatFormat::kLlama31);
  ChatTurn call{"assistant", "Let me look."};
  call.tool_calls = {{"", "get_weather", R"({"city": "Paris", "days": 2})"}};
  const std::vector<ChatTurn> turns = {
      {"system", "S"}, {"user", "Q"}, call, {"tool", "18"}, {"assistant", "18 at noon."},
      {"user", "Q2"}};
  EXPECT_EQ(
      RenderChat(ChatFormat::kLlama31, turns, {.date = "2026-12-04", .tools = kTools}),
      "<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Da"
      "te: December 2023\nToday Date: 04 Dec 2026\n\nS<|eot_id|><|start_header_id|>user<|end_he"
      "ader_id|>\n\nGiven the following functions, please respond with a JSON for a function ca"
      "ll with its proper arguments that best answers the given prompt.\n\nRespond in the forma"
      "t {\"name\": function name, \"parameters\": dictionary of argument name and its value}.D"
      "o not use variables.\n\n{\n    \"type\": \"function\",\n    \"function\": {\n        \"n"
      "ame\": \"get_weather\",\n        \"description\": \"Weather now, in °C.\",\n        \"pa"
      "rameters\": {\n            \"type\": \"object\",\n            \"properties\": {\n       "
      "         \"city\": {\n                    \"type\": \"string\"\n                },\n    "
      "            \"days\": {\n                    \"type\": \"integer\"\n                }\n "
      "           },\n            \"required\": [\n                \"city\"\n            ]\n   "
      "     }\n    }\n}\n\n{\n    \"type\": \"function\",\n    \"function\": {\n        \"name"
      "\": \"get_time\",\n        \"parameters\": {\n            \"type\": \"object\",\n       "
      "     \"properties\": {}\n        }\n    }\n}\n\nQ<|eot_id|><|start_header_id|>assistant<"
      "|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \""
      "days\": 2}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n\"18\"<|eot_id|><|st"
      "art_header_id|>assistant<|end_header_id|>\n\n18 at noon.<|eot_id|><|start_header_id|>use"
      "r<|end_header_id|>\n\nQ2<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(
      RenderChat(ChatFormat::kLlama31, turns, {.date = "2026-12-04"}),
      "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nTod"
      "ay Date: 04 Dec 2026\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nQ<|eot_id"
      "|><|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"paramet"
      "ers\": {\"city\": \"Paris\", \"days\": 2}}<|eot_id|><|start_header_id|>ipython<|end_head"
      "er_id|>\n\n\"18\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n18 at noon.<"
      "|eot_id|><|start_header_id|>user<|end_header_id|>\n\nQ2<|eot_id|><|start_header_id|>assi"
      "stant<|end_header_id|>\n\n");
  const std::vector<ChatTurn> plain = {{"system", "S"}, {"user", " Q "}};
  EXPECT_EQ(RenderChat(ChatFormat::kLlama31, plain, ChatOptions{}),
            RenderChat(ChatFormat::kLlama3, plain, ChatOptions{}));
}

// A conversation with Mistral's tools: a system message, a question, a call
// (the client's id "call_1"), its result, the answer and the next question.
std::vector<ChatTurn> MistralToolConversation() {
  ChatTurn call{"assistant", "Let me look."};
  call.tool_calls = {{"call_1", "get_weather", R"({"city": "Paris", "days": 2})"}};
  ChatTurn result{"tool", "18"};
  result.tool_call_id = "call_1";
  return {{"system", "S"}, {"user", "Q"}, call, result, {"assistant", "18 at noon."},
          {"user", "Q2"}};
}

// Mistral Nemo with tools, as Jinja renders its template: the tools before
// the last user turn, a call with the 9-character id the template requires
// (derived from the client's "call_1", the same for its result).
TEST(ChatTemplateTest, RendersMistralTekkenTools) {
  const std::vector<ChatTurn> turns = MistralToolConversation();
  EXPECT_EQ(MistralCallId("call_1"), "jQncnSWM3");
  EXPECT_EQ(MistralCallId("abcdefghi"), "abcdefghi");
  EXPECT_EQ(
      RenderChat(ChatFormat::kMistralTekken, turns, {.tools = kTools}),
      "[INST]Q[/INST][TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
      "\"days\": 2}, \"id\": \"jQncnSWM3\"}]</s>[TOOL_RESULTS]{\"content\": 18, \"call_id\": "
      "\"jQncnSWM3\"}[/TOOL_RESULTS]18 at noon.</s>[AVAILABLE_TOOLS][{\"type\": \"function\", "
      "\"function\": {\"name\": \"get_weather\", \"description\": \"Weather now, in °C.\", "
      "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, "
      "\"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}, {\"type\": \"function\", "
      "\"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\", "
      "\"properties\": {}}}}][/AVAILABLE_TOOLS][INST]S\n\nQ2[/INST]");
  EXPECT_EQ(ChatToolFormat(ChatFormat::kMistralTekken), ToolFormat::kMistral);
}

// Mistral's other [INST] templates and Llama 2's, as Jinja renders them
// (transformers' settings; each BOS after the first as "<s>"): a system
// message, a reply with spaces around it, and the next user turn; a
// conversation ending with the reply; a user turn with spaces.
TEST(ChatTemplateTest, RendersMistralAndLlama2Templates) {
  // Their markers, as llama.cpp tells them apart.
  EXPECT_EQ(DetectChatFormat("{{ bos_token }}{{ '[INST] ' + message['content'] + ' [/INST]' }}"),
            ChatFormat::kMistralInst);
  EXPECT_EQ(DetectChatFormat("{{- ' [INST] ' + system_message + '\\n\\n' }}"),
            ChatFormat::kMistralV1);
  EXPECT_EQ(DetectChatFormat("{{- \"[AVAILABLE_TOOLS] [\" }}{{- \"[INST] \" + message }}"),
            ChatFormat::kMistralV3);
  EXPECT_EQ(DetectChatFormat("{{- '[SYSTEM_PROMPT]' + system_message }}{{- '[INST]' }}"),
            ChatFormat::kMistralV7);
  EXPECT_EQ(DetectChatFormat("{{ bos_token + '[INST] ' + content.strip() }}<<SYS>>"),
            ChatFormat::kLlama2);
  const std::vector<ChatTurn> turns = {
      {"system", "S"}, {"user", "A"}, {"assistant", " B "}, {"user", "C"}};
  const std::vector<ChatTurn> ended = {{"system", "S"}, {"user", "A"}, {"assistant", " B "}};
  const std::vector<ChatTurn> spaced = {{"user", " Hi "}};
  struct Golden {
    ChatFormat format;
    const char *turns, *ended, *spaced;
  };
  const Golden goldens[] = {
      // Mistral 7B v0.1's first template has no system message (Jinja
      // raises): its text opens the first user turn, as llama.cpp writes it.
      {ChatFormat::kMistralInst, "[INST] S\nA [/INST] B </s>[INST] C [/INST]",
       "[INST] S\nA [/INST] B </s>", "[INST]  Hi  [/INST]"},
      {ChatFormat::kMistralV1, " [INST] S\n\nA [/INST]  B </s> [INST] C [/INST]",
       " [INST] S\n\nA [/INST]  B </s>", " [INST]  Hi  [/INST]"},
      {ChatFormat::kMistralV3, "[INST] A[/INST] B</s>[INST] S\n\nC[/INST]", "[INST] A[/INST] B</s>",
       "[INST]  Hi [/INST]"},
      {ChatFormat::kMistralV7,
       "[SYSTEM_PROMPT]S[/SYSTEM_PROMPT][INST]A[/INST] B </s>[INST]C[/INST]",
       "[SYSTEM_PROMPT]S[/SYSTEM_PROMPT][INST]A[/INST] B </s>", "[INST] Hi [/INST]"},
      {ChatFormat::kLlama2, "[INST] <<SYS>>\nS\n<</SYS>>\n\nA [/INST] B </s><s>[INST] C [/INST]",
       "[INST] <<SYS>>\nS\n<</SYS>>\n\nA [/INST] B </s>", "[INST] Hi [/INST]"},
  };
  for (const Golden& g : goldens) {
    EXPECT_EQ(RenderChat(g.format, turns, true), g.turns) << ChatFormatName(g.format);
    EXPECT_EQ(RenderChat(g.format, ended, false), g.ended) << ChatFormatName(g.format);
    EXPECT_EQ(RenderChat(g.format, spaced, true), g.spaced) << ChatFormatName(g.format);
  }
}

// Mistral Small 3's template: its default system message (a literal, or
// literals and today's date joined by +) where the conversation has none.
TEST(ChatTemplateTest, MistralV7DefaultSystemMessage) {
  const std::string small3 =
      "{%- set default_system_message = \"You are Mistral Small 3.\\nIt's 'quoted'.\" %}"
      "{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}";
  EXPECT_EQ(DefaultSystemMessage(small3), "You are Mistral Small 3.\nIt's 'quoted'.");
  EXPECT_EQ(DefaultSystemMessage("{%- set today = strftime_now(\"%Y-%m-%d\") %}{%- set "
                                 "default_system_message = 'Date: ' + today + '.\\n' -%}",
                                 "2026-12-04"),
            "Date: 2026-12-04.\n");
  EXPECT_EQ(DefaultSystemMessage("{%- set default_system_message = 'A' + yesterday %}"), "");
  EXPECT_EQ(DefaultSystemMessage("{%- set default_system_message = 'unclosed %}"), "");
  EXPECT_EQ(DefaultSystemMessage("[SYSTEM_PROMPT]"), "");
  const std::string expected =
      "[SYSTEM_PROMPT]You are Mistral Small 3.\nIt's 'quoted'.[/SYSTEM_PROMPT][INST] Hi [/INST]";
  EXPECT_EQ(RenderChat(ChatFormat::kMistralV7, {{"user", " Hi "}},
                       {.default_system = DefaultSystemMessage(small3)}),
            expected);
}

// Mistral 7B v0.3 with tools: Nemo's layout, with v0.3's spaces (Jinja's
// render of its template).
TEST(ChatTemplateTest, RendersMistralV3Tools) {
  const std::vector<ChatTurn> turns = MistralToolConversation();
  EXPECT_EQ(
      RenderChat(ChatFormat::kMistralV3, turns, {.tools = kTools}),
      "[INST] Q[/INST][TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"days\": 2}, \"id\": \"jQncnSWM3\"}]</s>[TOOL_RESULTS] {\"content\": 18, "
      "\"call_id\": \"jQncnSWM3\"}[/TOOL_RESULTS] 18 at noon.</s>[AVAILABLE_TOOLS] [{\"type\": "
      "\"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather now, in "
      "°C.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": "
      "\"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}, {\"type\": "
      "\"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": "
      "\"object\", \"properties\": {}}}}][/AVAILABLE_TOOLS][INST] S\n\nQ2[/INST]");
  EXPECT_EQ(ChatToolFormat(ChatFormat::kMistralV3), ToolFormat::kMistral);
}

TEST(ChatTemplateTest, ToolFormats) {
  EXPECT_EQ(ChatToolFormat(ChatFormat::kQwen), ToolFormat::kHermes);
  EXPECT_EQ(ChatToolFormat(ChatFormat::kGlm), ToolFormat::kGlm);
  EXPECT_EQ(ChatToolFormat(ChatFormat::kKimiK2), ToolFormat::kKimiK2);
  EXPECT_EQ(ChatToolFormat(ChatFormat::kHarmony), ToolFormat::kHarmony);
  EXPECT_EQ(ChatToolFormat(ChatFormat::kDeepSeekV31), ToolFormat::kDeepSeekV31);
  EXPECT_EQ(ChatToolFormat(ChatFormat::kLlama31), ToolFormat::kLlama3Json);
  for (ChatFormat f : {ChatFormat::kPlain, ChatFormat::kChatMl, ChatFormat::kLlama3,
                       ChatFormat::kLlama2, ChatFormat::kMistralInst, ChatFormat::kMistralV1,
                       ChatFormat::kMistralV7, ChatFormat::kDeepSeek}) {
    EXPECT_EQ(ChatToolFormat(f), ToolFormat::kNone) << ChatFormatName(f);
  }
}

// Qwen3 keeps a reply's reasoning only after the last user query.
TEST(ChatTemplateTest, QwenKeepsReasoningAfterTheLastQuery) {
  ChatTurn call{"assistant", "<think>\nneed data\n</think>\n\n"};
  call.tool_calls = {{"", "get_time", "{}"}};
  const std::vector<ChatTurn> turns = {
      {"user", "Q"}, {"assistant", "<think>old</think>A"}, {"user", "Q2"}, call, {"tool", "noon"}};
  EXPECT_EQ(RenderChat(ChatFormat::kQwen, turns, ChatOptions{}),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n"
            "<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n<think>\nneed data\n"
            "</think>\n\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n"
            "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nnoon\n"
            "</tool_response><|im_end|>\n<|im_start|>assistant\n");
}

// gpt-oss: the tools as a TypeScript namespace in the developer message
// (optional and required parameters, descriptions, enums and defaults,
// arrays, nullables, a nested object and a oneOf, with the whitespace its
// template writes), calls as messages to functions.NAME and results from
// them, as Jinja renders the gpt-oss template.
TEST(ChatTemplateTest, RendersHarmonyTools) {
  constexpr char kHarmonyTools[] =
      R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather now.", "parameters": {"type": "object", "properties": {
  "city": {"type": "string", "description": "City name"},
  "days": {"type": "integer", "default": 1},
  "units": {"type": "string", "enum": ["c", "f"], "default": "c"},
  "tags": {"type": "array", "items": {"type": "string"}},
  "points": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "number"}}}},
  "note": {"type": "string", "nullable": true},
  "where": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}}, "required": ["lat"]},
  "exact": {"type": "boolean"},
  "any": {"description": "Anything"},
  "either": {"oneOf": [{"type": "string"}, {"type": "number", "description": "n"}]},
  "many": {"type": ["string", "null"]}}, "required": ["city"]}}},
 {"type": "function", "function": {"name": "noop", "description": "Nothing.", "parameters": {"type": "object", "properties": {}}}}])";
  ChatTurn call{"assistant", "Need the weather."};
  call.tool_calls = {{"c1", "get_weather", R"({"city": "Paris", "days": 2})"}};
  ChatTurn result{"tool", "18 \"C\"\nsunny"};
  result.tool_call_id = "c1";
  ChatTurn call2{"assistant", "Checking."};
  call2.tool_calls = {{"c2", "noop", "{}"}};
  ChatTurn result2{"tool", "done"};
  result2.tool_call_id = "c2";
  const std::vector<ChatTurn> turns = {
      {"system", "S"}, {"user", "Q"}, call,   result, {"assistant", "18 and sunny."},
      {"user", "Q2"},  call2,         result2};
  EXPECT_EQ(
      RenderChat(ChatFormat::kHarmony, turns, {.date = "2026-12-04", .tools = kHarmonyTools}),
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by Open"
      "AI.\nKnowledge cutoff: 2024-06\nCurrent date: 2026-12-04\n"
      "\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must b"
      "e included for every message.\nCalls to these tools must go to the commentary chan"
      "nel: 'functions'.<|end|><|start|>developer<|message|># Instructions\n"
      "\nS\n\n# Tools\n\n## functions\n\nnamespace functions {\n"
      "\n// Weather now.\ntype get_weather = (_: {\n"
      "// City name\ncity: string,\ndays?: number, // default: 1,\n"
      "units?: \"c\" | \"f\", // default: c,\ntags?: string[],\n"
      "points?: {\nx?: \n                number}[],\n"
      "note?: string | null,\nwhere?: {\nlat: \n                number, lon?: \n"
      "                number},\nexact?: boolean,\n"
      "// Anything\nany?: any,\neither?: string | \n"
      "number// n,\nmany?: string | null,\n}) => any;\n"
      "\n// Nothing.\ntype noop = () => any;\n\n} // namespace functions<|end|><|start|>user"
      "<|message|>Q<|end|><|start|>assistant to=functions.get_weather<|channel|>commenta"
      "ry json<|message|>{\"city\": \"Paris\", \"days\": 2}<|call|><|start|>functions.get_weat"
      "her to=assistant<|channel|>commentary<|message|>\"18 \\\"C\\\"\\nsunny\"<|end|><|start|>"
      "assistant<|channel|>final<|message|>18 and sunny.<|end|><|start|>user<|message|>Q"
      "2<|end|><|start|>assistant<|channel|>analysis<|message|>Checking.<|end|><|start|>"
      "assistant to=functions.noop<|channel|>commentary json<|message|>{}<|call|><|start"
      "|>functions.noop to=assistant<|channel|>commentary<|message|>\"done\"<|end|><|start"
      "|>assistant");
}

}  // namespace
}  // namespace waste::text
