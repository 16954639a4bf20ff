#include "daemon/text/chat_template.h"

#include <algorithm>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/python_json.h"
#include "daemon/text/chat_mistral.h"
#include "daemon/text/chat_tools.h"

namespace waste::text {

ChatFormat DetectChatFormat(const std::string& t) {
  // gpt-oss: a message's channel (analysis, commentary, final).
  if (absl::StrContains(t, "<|channel|>")) return ChatFormat::kHarmony;
  // Kimi-K2's closes turns with ChatML's <|im_end|> but opens them its own way.
  if (absl::StrContains(t, "<|im_assistant|>assistant<|im_middle|>")) return ChatFormat::kKimiK2;
  // Qwen2.5/Qwen3/QwQ: tool results go back in a user turn (Hermes' own
  // template gives them a tool turn: plain ChatML).
  if (absl::StrContains(t, "<|im_start|>") && absl::StrContains(t, "<tool_call>") &&
      !absl::StrContains(t, "<|im_start|>tool")) {
    return ChatFormat::kQwen;
  }
  if (absl::StrContains(t, "<|im_start|>")) return ChatFormat::kChatMl;
  if (absl::StrContains(t, "<|start_header_id|>")) {
    return absl::StrContains(t, "Environment: ipython") ? ChatFormat::kLlama31
                                                        : ChatFormat::kLlama3;
  }
  // GLM-4.5/4.6 (and GLM-4's): the template opens with these two tokens.
  if (absl::StrContains(t, "[gMASK]<sop>")) return ChatFormat::kGlm;
  // DeepSeek-V3.1: a reply opens with </think> (or <think>, thinking).
  if (absl::StrContains(t, "<｜Assistant｜></think>")) return ChatFormat::kDeepSeekV31;
  if (absl::StrContains(t, "<｜User｜>") || absl::StrContains(t, "<｜Assistant｜>")) {
    return ChatFormat::kDeepSeek;
  }
  if (absl::StrContains(t, "[INST]")) return DetectMistralFormat(t);
  if (absl::StrContains(t, "<start_of_turn>")) return ChatFormat::kGemma;
  return ChatFormat::kPlain;
}

const char* ChatFormatName(ChatFormat format) {
  switch (format) {
    case ChatFormat::kPlain:
      return "plain";
    case ChatFormat::kChatMl:
      return "chatml";
    case ChatFormat::kQwen:
      return "qwen";
    case ChatFormat::kLlama3:
      return "llama3";
    case ChatFormat::kLlama31:
      return "llama3.1";
    case ChatFormat::kLlama2:
      return "llama2";
    case ChatFormat::kMistralInst:
      return "mistral-inst";
    case ChatFormat::kMistralV1:
      return "mistral-v1";
    case ChatFormat::kMistralV3:
      return "mistral-v3";
    case ChatFormat::kMistralTekken:
      return "mistral-tekken";
    case ChatFormat::kMistralV7:
      return "mistral-v7";
    case ChatFormat::kDeepSeek:
      return "deepseek";
    case ChatFormat::kDeepSeekV31:
      return "deepseek-v3.1";
    case ChatFormat::kKimiK2:
      return "kimi-k2";
    case ChatFormat::kHarmony:
      return "harmony";
    case ChatFormat::kGlm:
      return "glm";
    case ChatFormat::kGemma:
      return "gemma";
  }
  return "?";
}

ToolFormat ChatToolFormat(ChatFormat format) {
  switch (format) {
    case ChatFormat::kQwen:
      return ToolFormat::kHermes;
    case ChatFormat::kGlm:
      return ToolFormat::kGlm;
    case ChatFormat::kKimiK2:
      return ToolFormat::kKimiK2;
    case ChatFormat::kHarmony:
      return ToolFormat::kHarmony;
    case ChatFormat::kDeepSeekV31:
      return ToolFormat::kDeepSeekV31;
    case ChatFormat::kLlama31:
      return ToolFormat::kLlama3Json;
    case ChatFormat::kMistralV3:
    case ChatFormat::kMistralTekken:
      return ToolFormat::kMistral;
    default:
      return ToolFormat::kNone;
  }
}

namespace {

// ChatML's opening of a reply: Qwen3 with enable_thinking = false also
// writes the reply's (empty) reasoning block.
void ChatMlGenerationPrompt(const ChatOptions& options, std::string* out) {
  if (!options.add_generation_prompt) return;
  *out += "<|im_start|>assistant\n";
  if (options.thinking == false) *out += "<think>\n\n</think>\n\n";
}

absl::string_view StripNewlines(absl::string_view s, bool front, bool back) {
  while (front && !s.empty() && s.front() == '\n') s.remove_prefix(1);
  while (back && !s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

// Qwen3's template (Qwen2.5's too, without reasoning): the tools in the
// system turn; a reply's reasoning kept only after the last user query
// (reasoning replies to tool results included); its calls as <tool_call>
// blocks; tool results in one user turn, each in <tool_response>.
std::string RenderQwen(const std::vector<ChatTurn>& turns, const ChatOptions& options) {
  const int n = static_cast<int>(turns.size());
  const bool system_first = n > 0 && turns[0].role == "system";
  std::string out;
  if (!options.tools.empty()) {
    absl::StrAppend(&out, "<|im_start|>system\n", system_first ? turns[0].content + "\n\n" : "",
                    QwenToolsText(options.tools), "<|im_end|>\n");
  } else if (system_first) {
    absl::StrAppend(&out, "<|im_start|>system\n", turns[0].content, "<|im_end|>\n");
  }
  int last_query = n - 1;
  for (int i = n - 1; i >= 0; --i) {
    const std::string& c = turns[i].content;
    if (turns[i].role == "user" &&
        !(absl::StartsWith(c, "<tool_response>") && absl::EndsWith(c, "</tool_response>"))) {
      last_query = i;
      break;
    }
  }
  for (int i = system_first ? 1 : 0; i < n; ++i) {
    const ChatTurn& t = turns[i];
    if (t.role == "assistant") {
      absl::string_view content = t.content, reasoning;
      if (const size_t close = content.find("</think>"); close != absl::string_view::npos) {
        reasoning = StripNewlines(content.substr(0, close), false, true);
        if (const size_t open = reasoning.rfind("<think>"); open != absl::string_view::npos) {
          reasoning = reasoning.substr(open + 7);
        }
        reasoning = StripNewlines(reasoning, true, false);
        content = StripNewlines(content.substr(content.rfind("</think>") + 8), true, false);
      }
      out += "<|im_start|>assistant\n";
      if (i > last_query && (i == n - 1 || !reasoning.empty())) {
        absl::StrAppend(&out, "<think>\n", StripNewlines(reasoning, true, true), "\n</think>\n\n",
                        StripNewlines(content, true, false));
      } else {
        absl::StrAppend(&out, content);
      }
      for (size_t c = 0; c < t.tool_calls.size(); ++c) {
        if (c > 0 || !content.empty()) out += "\n";
        out += QwenToolCall(t.tool_calls[c]);
      }
      out += "<|im_end|>\n";
    } else if (t.role == "tool") {
      if (i == 0 || turns[i - 1].role != "tool") out += "<|im_start|>user";
      absl::StrAppend(&out, "\n<tool_response>\n", t.content, "\n</tool_response>");
      if (i == n - 1 || turns[i + 1].role != "tool") out += "<|im_end|>\n";
    } else {
      absl::StrAppend(&out, "<|im_start|>", t.role, "\n", t.content, "<|im_end|>\n");
    }
  }
  ChatMlGenerationPrompt(options, &out);
  return out;
}

// Llama 2's template: <<SYS>> in the first user turn, each user turn after a
// BOS (the first one the tokenizer's), the text stripped.
std::string RenderLlama2(const std::vector<ChatTurn>& turns) {
  // [INST] <<SYS>>\nsystem\n<</SYS>>\n\nuser [/INST] assistant </s><s>[INST] ...
  std::string out, system;
  for (const ChatTurn& turn : turns) {
    if (turn.role == "system") {
      system = turn.content;
    } else if (turn.role == "assistant") {
      absl::StrAppend(&out, " ", absl::StripAsciiWhitespace(turn.content), " </s>");
    } else {
      std::string content = turn.content;
      if (!system.empty()) {
        content = absl::StrCat("<<SYS>>\n", system, "\n<</SYS>>\n\n", content);
        system.clear();
      }
      absl::StrAppend(&out, out.empty() ? "" : "<s>", "[INST] ",
                      absl::StripAsciiWhitespace(content), " [/INST]");
    }
  }
  return out;
}

// gpt-oss's harmony, as its GGUF template renders a conversation: the
// system message (identity, knowledge cutoff, date, reasoning effort,
// channels) always; a first system turn as the developer's instructions,
// the tools after them as a TypeScript namespace; earlier replies as
// final-channel messages, their calls as messages to functions.NAME (what
// the reply said before a call as its analysis, unless a final answer
// follows), and a tool's result as a message from the function it answers.
std::string RenderHarmony(const std::vector<ChatTurn>& turns, const ChatOptions& options) {
  const std::string today = options.date.empty()
                                ? absl::FormatTime("%Y-%m-%d", absl::Now(), absl::UTCTimeZone())
                                : options.date;
  const std::string effort = options.reasoning_effort.empty() ? "medium" : options.reasoning_effort;
  const bool tools = !options.tools.empty();
  std::string out = absl::StrCat(
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
      "Knowledge cutoff: 2024-06\nCurrent date: ",
      today, "\n\nReasoning: ", effort,
      "\n\n# Valid channels: analysis, commentary, final. Channel must be "
      "included for every message.",
      tools ? "\nCalls to these tools must go to the commentary channel: 'functions'." : "",
      "<|end|>");
  const int n = static_cast<int>(turns.size());
  const bool instructions = n > 0 && (turns[0].role == "system" || turns[0].role == "developer");
  if ((instructions && !turns[0].content.empty()) || tools) {
    out += "<|start|>developer<|message|>";
    if (instructions && !turns[0].content.empty()) {
      absl::StrAppend(&out, "# Instructions\n\n", turns[0].content, "\n\n");
    }
    if (tools) absl::StrAppend(&out, "# Tools\n\n", HarmonyToolsNamespace(options.tools));
    out += "<|end|>";
  }
  std::string last_call;  // The function the latest call went to.
  for (int i = instructions ? 1 : 0; i < n; ++i) {
    const ChatTurn& t = turns[i];
    if (t.role == "system" || t.role == "developer") {
      absl::StrAppend(&out, "<|start|>developer<|message|># Instructions\n\n", t.content,
                      "\n\n<|end|>");
    } else if (t.role == "assistant" && !t.tool_calls.empty()) {
      const bool answered = std::any_of(turns.begin() + i + 1, turns.end(), [](const ChatTurn& u) {
        return u.role == "assistant" && u.tool_calls.empty();
      });
      if (!t.content.empty() && !answered) {
        absl::StrAppend(&out, "<|start|>assistant<|channel|>analysis<|message|>", t.content,
                        "<|end|>");
      }
      for (const ToolCall& call : t.tool_calls) {
        absl::StrAppend(&out, "<|start|>assistant to=functions.", call.name,
                        "<|channel|>commentary json<|message|>", PythonJsonFromText(call.arguments),
                        "<|call|>");
        last_call = call.name;
      }
    } else if (t.role == "assistant") {
      absl::StrAppend(&out, "<|start|>assistant<|channel|>final<|message|>", t.content, "<|end|>");
      last_call.clear();
    } else if (t.role == "tool") {
      // From the function whose call it answers (the template: the latest).
      std::string from = last_call;
      for (int j = i - 1; j >= 0 && !t.tool_call_id.empty(); --j) {
        for (const ToolCall& call : turns[j].tool_calls) {
          if (call.id == t.tool_call_id) from = call.name;
        }
      }
      absl::StrAppend(&out, "<|start|>functions.", from,
                      " to=assistant<|channel|>commentary<|message|>", PythonJsonString(t.content),
                      "<|end|>");
    } else {
      absl::StrAppend(&out, "<|start|>", t.role, "<|message|>", t.content, "<|end|>");
    }
  }
  if (options.add_generation_prompt) out += "<|start|>assistant";
  return out;
}

// GLM-4.5's template: [gMASK]<sop>, then <|role|>\n and each turn. A reply
// opens with its reasoning in <think></think>: kept (stripped) only for the
// replies after the last user turn, empty before; a tool's results follow one
// <|observation|>, each in <tool_response>.
std::string RenderGlm(const std::vector<ChatTurn>& turns, const ChatOptions& options) {
  int last_user = -1;
  for (int i = 0; i < static_cast<int>(turns.size()); ++i) {
    if (turns[i].role == "user") last_user = i;
  }
  std::string out = "[gMASK]<sop>";
  if (!options.tools.empty()) out += GlmToolsTurn(options.tools);
  for (int i = 0; i < static_cast<int>(turns.size()); ++i) {
    const ChatTurn& t = turns[i];
    if (t.role == "assistant") {
      absl::string_view content = t.content, reasoning;
      // As the template splits: reasoning before the first </think> (after
      // its last <think>), the answer after the last </think>.
      if (const size_t close = content.find("</think>"); close != absl::string_view::npos) {
        reasoning = content.substr(0, close);
        if (const size_t open = reasoning.rfind("<think>"); open != absl::string_view::npos) {
          reasoning = reasoning.substr(open + 7);
        }
        content = content.substr(content.rfind("</think>") + 8);
      }
      reasoning = absl::StripAsciiWhitespace(reasoning);
      content = absl::StripAsciiWhitespace(content);
      absl::StrAppend(&out, "<|assistant|>\n<think>",
                      i > last_user ? reasoning : absl::string_view(), "</think>");
      if (!content.empty()) absl::StrAppend(&out, "\n", content);
      for (const ToolCall& call : t.tool_calls) absl::StrAppend(&out, "\n", GlmToolCall(call));
    } else if (t.role == "tool") {
      if (i == 0 || turns[i - 1].role != "tool") out += "<|observation|>";
      absl::StrAppend(&out, "\n<tool_response>\n", t.content, "\n</tool_response>");
    } else if (t.role == "system") {
      absl::StrAppend(&out, "<|system|>\n", t.content);
    } else {
      absl::StrAppend(&out, "<|user|>\n", t.content);
      if (options.thinking == false && !absl::EndsWith(t.content, "/nothink")) {
        out += "/nothink";
      }
    }
  }
  if (options.add_generation_prompt) {
    out += "<|assistant|>";
    if (options.thinking == false) out += "\n<think></think>";
  }
  return out;
}

// DeepSeek-V3.1's template: every system turn first (joined by blank lines),
// then the tools, then the turns; a reply's calls in one
// <｜tool▁calls▁begin｜> section; a reply after a user turn opens with </think> (its
// reasoning, if any, dropped), one after a tool's output does not; the
// generation prompt follows a user turn only, opening with </think>, or
// <think> when thinking.
std::string RenderDeepSeekV31(const std::vector<ChatTurn>& turns, const ChatOptions& options) {
  std::string out;
  bool first_system = true;
  for (const ChatTurn& t : turns) {
    if (t.role != "system") continue;
    absl::StrAppend(&out, first_system ? "" : "\n\n", t.content);
    first_system = false;
  }
  // The tools after the system prompt, as the model card lays them out
  // (the template itself has no place for them).
  if (!options.tools.empty()) absl::StrAppend(&out, "\n\n", DeepSeekToolsText(options.tools));
  bool last_user = false, after_tool = false;
  for (const ChatTurn& t : turns) {
    if (t.role == "user") {
      absl::StrAppend(&out, "<｜User｜>", t.content);
      last_user = true;
      after_tool = false;
    } else if (t.role == "assistant" && !t.tool_calls.empty()) {
      if (last_user) out += "<｜Assistant｜></think>";
      absl::StrAppend(&out, t.content, DeepSeekToolCalls(t.tool_calls), "<｜end▁of▁sentence｜>");
      last_user = after_tool = false;
    } else if (t.role == "assistant") {
      if (last_user) out += "<｜Assistant｜></think>";
      absl::string_view content = t.content;
      if (const size_t close = content.find("</think>");
          !after_tool && close != absl::string_view::npos) {
        content = content.substr(close + 8);
      }
      absl::StrAppend(&out, content, "<｜end▁of▁sentence｜>");
      last_user = after_tool = false;
    } else if (t.role == "tool") {
      absl::StrAppend(&out, "<｜tool▁output▁begin｜>", t.content, "<｜tool▁output▁end｜>");
      last_user = false;
      after_tool = true;
    }
  }
  if (options.add_generation_prompt && last_user) {
    out += options.thinking.value_or(false) ? "<｜Assistant｜><think>" : "<｜Assistant｜></think>";
  }
  return out;
}

void AppendLlama3Turn(const ChatTurn& t, std::string* out) {
  absl::StrAppend(out, "<|start_header_id|>", t.role, "<|end_header_id|>\n\n",
                  absl::StripAsciiWhitespace(t.content), "<|eot_id|>");
}

void RenderLlama3Turns(const std::vector<ChatTurn>& turns, bool add_generation_prompt,
                       std::string* out) {
  for (const ChatTurn& t : turns) AppendLlama3Turn(t, out);
  if (add_generation_prompt) *out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

// Llama 3.1/3.2/3.3's template where tools are offered or were called (a
// conversation without them renders as Llama 3's, as llama.cpp's own llama3
// template does): a system turn with the knowledge and today's dates (and
// "Environment: ipython" with tools), the tools in the first user turn,
// calls as {"name", "parameters"} JSON, results in ipython turns (as
// tojson writes a string: quoted).
std::string RenderLlama31(const std::vector<ChatTurn>& turns, const ChatOptions& options) {
  const bool tools = !options.tools.empty();
  const bool history = absl::c_any_of(turns, [](const ChatTurn& t) {
    return !t.tool_calls.empty() || t.role == "tool" || t.role == "ipython";
  });
  std::string out;
  if (!tools && !history) {
    RenderLlama3Turns(turns, options.add_generation_prompt, &out);
    return out;
  }
  absl::Time date = absl::Now();
  if (!options.date.empty()) {
    std::string error;
    absl::ParseTime("%Y-%m-%d", options.date, absl::UTCTimeZone(), &date, &error);
  }
  const bool system = !turns.empty() && turns[0].role == "system";
  size_t next = system ? 1 : 0;
  absl::StrAppend(&out, "<|start_header_id|>system<|end_header_id|>\n\n",
                  tools ? "Environment: ipython\n" : "",
                  "Cutting Knowledge Date: December 2023\nToday Date: ",
                  absl::FormatTime("%d %b %Y", date, absl::UTCTimeZone()), "\n\n",
                  system ? absl::StripAsciiWhitespace(turns[0].content) : "", "<|eot_id|>");
  if (tools && next < turns.size()) {
    out += LlamaToolsTurn(options.tools,
                          std::string(absl::StripAsciiWhitespace(turns[next++].content)));
  }
  for (; next < turns.size(); ++next) {
    const ChatTurn& t = turns[next];
    if (!t.tool_calls.empty()) {
      // The template takes one call a message (the engine refuses more).
      out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      for (size_t i = 0; i < t.tool_calls.size(); ++i) {
        absl::StrAppend(&out, i > 0 ? "; " : "", LlamaToolCall(t.tool_calls[i]));
      }
      out += "<|eot_id|>";
    } else if (t.role == "tool" || t.role == "ipython") {
      absl::StrAppend(&out, "<|start_header_id|>ipython<|end_header_id|>\n\n",
                      PythonJsonString(t.content), "<|eot_id|>");
    } else {
      AppendLlama3Turn(t, &out);
    }
  }
  if (options.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// Gemma 3's template (Gemma 2's raises on a system message; llama.cpp
// merges it the same way): a leading system message's text and a blank line
// open the first turn; every message trimmed, the assistant's role "model".
std::string RenderGemma(const std::vector<ChatTurn>& turns, bool add_generation_prompt) {
  std::string out;
  const bool system = !turns.empty() && turns[0].role == "system";
  for (size_t i = system ? 1 : 0; i < turns.size(); ++i) {
    const ChatTurn& t = turns[i];
    absl::StrAppend(&out, "<start_of_turn>", t.role == "assistant" ? "model" : t.role, "\n",
                    system && i == 1 ? turns[0].content + "\n\n" : "",
                    absl::StripAsciiWhitespace(t.content), "<end_of_turn>\n");
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

}  // namespace

bool HasThinkingSwitch(const std::string& jinja_template) {
  return absl::StrContains(jinja_template, "enable_thinking") ||
         absl::StrContains(jinja_template, "<｜Assistant｜></think>");
}

bool PromptOpensReasoning(const std::string& rendered) {
  return absl::EndsWith(rendered, "<think>") || absl::EndsWith(rendered, "<think>\n");
}

std::string RenderChat(ChatFormat format, const std::vector<ChatTurn>& turns,
                       const ChatOptions& options) {
  const bool add_generation_prompt = options.add_generation_prompt;
  std::string out;
  switch (format) {
    case ChatFormat::kHarmony:
      return RenderHarmony(turns, options);
    case ChatFormat::kGlm:
      return RenderGlm(turns, options);
    case ChatFormat::kDeepSeekV31:
      return RenderDeepSeekV31(turns, options);
    case ChatFormat::kChatMl:
      for (const ChatTurn& t : turns) {
        absl::StrAppend(&out, "<|im_start|>", t.role, "\n", t.content, "<|im_end|>\n");
      }
      ChatMlGenerationPrompt(options, &out);
      return out;
    case ChatFormat::kQwen:
      return RenderQwen(turns, options);
    case ChatFormat::kLlama3:
      RenderLlama3Turns(turns, add_generation_prompt, &out);
      return out;
    case ChatFormat::kLlama31:
      return RenderLlama31(turns, options);
    case ChatFormat::kDeepSeek:
      for (const ChatTurn& t : turns) {
        if (t.role == "system") {
          out += t.content;
        } else if (t.role == "assistant") {
          absl::StrAppend(&out, "<｜Assistant｜>", t.content, "<｜end▁of▁sentence｜>");
        } else {
          absl::StrAppend(&out, "<｜User｜>", t.content);
        }
      }
      if (add_generation_prompt) out += "<｜Assistant｜>";
      return out;
    case ChatFormat::kKimiK2:
      // system, user and assistant open as <|im_ROLE|>ROLE<|im_middle|>; a
      // tool's result as a system turn named tool, headed by the call's id;
      // the tools first, in a tool_declare turn.
      if (!options.tools.empty()) out += KimiToolsTurn(options.tools);
      for (const ChatTurn& t : turns) {
        const bool own = t.role == "system" || t.role == "user" || t.role == "assistant";
        absl::StrAppend(&out, "<|im_", own ? t.role : "system", "|>", t.role, "<|im_middle|>");
        if (t.role == "tool" && !t.tool_call_id.empty()) {
          absl::StrAppend(&out, "## Return of ", t.tool_call_id, "\n");
        }
        out += t.content;
        if (!t.tool_calls.empty()) out += KimiToolCalls(t.tool_calls);
        out += "<|im_end|>";
      }
      if (add_generation_prompt) out += "<|im_assistant|>assistant<|im_middle|>";
      return out;
    case ChatFormat::kLlama2:
      return RenderLlama2(turns);
    case ChatFormat::kGemma:
      return RenderGemma(turns, add_generation_prompt);
    case ChatFormat::kMistralInst:
    case ChatFormat::kMistralV1:
    case ChatFormat::kMistralV3:
    case ChatFormat::kMistralTekken:
    case ChatFormat::kMistralV7:
      return RenderMistral(format, turns, options);
    case ChatFormat::kPlain:
      for (const ChatTurn& t : turns) {
        std::string role = t.role;
        if (!role.empty()) role[0] = absl::ascii_toupper(role[0]);
        absl::StrAppend(&out, role, ": ", t.content, "\n");
      }
      if (add_generation_prompt) out += "Assistant:";
      return out;
  }
  return out;
}

}  // namespace waste::text
