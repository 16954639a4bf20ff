// Mistral's [INST] templates, one renderer per family of their layouts:
//   - kMistralInst, Mistral 7B v0.1's and Mixtral's first template:
//     "[INST] " + user + " [/INST]" + reply + "</s>", no BOS between turns. It
//     has no system message (Jinja raises): as llama.cpp does, its text and a
//     newline open the first user turn.
//   - kMistralV1 (7B v0.2, Mixtral 8x7B's later template): " [INST] " +
//     user + " [/INST]", " " + reply + "</s>"; the system text and a blank
//     line open the first user turn.
//   - kMistralV3 (7B v0.3, Mixtral 8x22B) and kMistralTekken (Nemo): the
//     system text opens the last turn if it is the user's, the tools come
//     before the last user turn, calls in [TOOL_CALLS], results in
//     [TOOL_RESULTS]; v0.3 writes "[INST] " and a space before each reply
//     (trimmed), each [, and each result's {, Nemo none.
//   - kMistralV7 (Mistral Small 3.x, Devstral): the system message, or the
//     template's default one, in [SYSTEM_PROMPT] first; later system turns
//     in place; "[INST]" + user + "[/INST]", reply + "</s>".
// Roles a template does not know (it raises) render as user turns.
#include "daemon/text/chat_mistral.h"

#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/text/chat_tools.h"

namespace waste::text {
namespace {

bool IsSystem(const std::vector<ChatTurn>& turns) {
  return !turns.empty() && turns[0].role == "system";
}

// kMistralInst and kMistralV1: the first system text goes into the first
// user turn.
std::string RenderMistralV1(const std::vector<ChatTurn>& turns, bool v1) {
  bool system_pending = IsSystem(turns);
  std::string out;
  for (size_t i = system_pending ? 1 : 0; i < turns.size(); ++i) {
    const ChatTurn& t = turns[i];
    if (t.role == "assistant") {
      absl::StrAppend(&out, v1 ? " " : "", t.content, "</s>");
      continue;
    }
    out += v1 ? " [INST] " : "[INST] ";
    if (system_pending) {
      absl::StrAppend(&out, turns[0].content, v1 ? "\n\n" : "\n");
      system_pending = false;
    }
    absl::StrAppend(&out, t.content, " [/INST]");
  }
  return out;
}

// kMistralV3 and kMistralTekken (see the file comment); the prompt ends with
// [/INST], there is no generation prompt.
std::string RenderMistralV3(const std::vector<ChatTurn>& turns, const ChatOptions& options,
                            bool spaced) {
  const bool system = IsSystem(turns);
  const std::string* last_user = nullptr;
  for (const ChatTurn& t : turns) {
    if (t.role == "user" && (&t != &turns[0] || !system)) last_user = &t.content;
  }
  const std::string space = spaced ? " " : "";
  std::string out;
  for (size_t i = system ? 1 : 0; i < turns.size(); ++i) {
    const ChatTurn& t = turns[i];
    if (!t.tool_calls.empty()) {
      out += MistralToolCalls(t.tool_calls, spaced);
      continue;
    }
    if (t.role == "assistant") {
      absl::StrAppend(&out, space,
                      spaced ? absl::StripAsciiWhitespace(t.content) : absl::string_view(t.content),
                      "</s>");
      continue;
    }
    if (t.role == "tool") {
      absl::StrAppend(&out, "[TOOL_RESULTS]", space, "{\"content\": ", t.content,
                      ", \"call_id\": \"", MistralCallId(t.tool_call_id), "\"}[/TOOL_RESULTS]");
      continue;
    }
    if (!options.tools.empty() && t.role == "user" && last_user != nullptr &&
        t.content == *last_user) {
      out += MistralToolsText(options.tools, spaced);
    }
    absl::StrAppend(&out, "[INST]", space);
    if (system && i + 1 == turns.size()) absl::StrAppend(&out, turns[0].content, "\n\n");
    absl::StrAppend(&out, t.content, "[/INST]");
  }
  return out;
}

std::string RenderMistralV7(const std::vector<ChatTurn>& turns, const ChatOptions& options) {
  const bool system = IsSystem(turns);
  const std::string& first = system ? turns[0].content : options.default_system;
  std::string out;
  if (system || !first.empty()) absl::StrAppend(&out, "[SYSTEM_PROMPT]", first, "[/SYSTEM_PROMPT]");
  for (size_t i = system ? 1 : 0; i < turns.size(); ++i) {
    const ChatTurn& t = turns[i];
    if (t.role == "assistant") {
      absl::StrAppend(&out, t.content, "</s>");
    } else if (t.role == "system") {
      absl::StrAppend(&out, "[SYSTEM_PROMPT]", t.content, "[/SYSTEM_PROMPT]");
    } else {
      absl::StrAppend(&out, "[INST]", t.content, "[/INST]");
    }
  }
  return out;
}

// A Jinja string literal at `s` (its quote first): its value, and `s` moved
// past it; false where it does not close.
bool ConsumeJinjaString(std::string_view* s, std::string* value) {
  const char quote = s->front();
  for (size_t i = 1; i < s->size(); ++i) {
    const char c = (*s)[i];
    if (c == quote) {
      s->remove_prefix(i + 1);
      return true;
    }
    if (c != '\\' || i + 1 == s->size()) {
      *value += c;
      continue;
    }
    const char e = (*s)[++i];
    *value += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
  }
  return false;
}

}  // namespace

ChatFormat DetectMistralFormat(const std::string& t) {
  if (absl::StrContains(t, "[SYSTEM_PROMPT]")) return ChatFormat::kMistralV7;
  const bool tools = absl::StrContains(t, "[AVAILABLE_TOOLS]");
  if (absl::StrContains(t, "' [INST] ' + system_message") ||
      (tools && absl::StrContains(t, " [INST]"))) {
    return ChatFormat::kMistralV1;
  }
  if (tools) {
    return absl::StrContains(t, "\"[INST]\"") ? ChatFormat::kMistralTekken : ChatFormat::kMistralV3;
  }
  if (absl::StrContains(t, "<<SYS>>") || absl::StrContains(t, "bos_token + '[INST]") ||
      absl::StrContains(t, "bos_token + \"[INST]")) {
    return ChatFormat::kLlama2;
  }
  return ChatFormat::kMistralInst;
}

std::string RenderMistral(ChatFormat format, const std::vector<ChatTurn>& turns,
                          const ChatOptions& options) {
  switch (format) {
    case ChatFormat::kMistralInst:
      return RenderMistralV1(turns, false);
    case ChatFormat::kMistralV1:
      return RenderMistralV1(turns, true);
    case ChatFormat::kMistralV3:
      return RenderMistralV3(turns, options, true);
    case ChatFormat::kMistralTekken:
      return RenderMistralV3(turns, options, false);
    default:
      return RenderMistralV7(turns, options);
  }
}

std::string DefaultSystemMessage(const std::string& jinja_template, const std::string& date) {
  constexpr std::string_view kSet = "set default_system_message =";
  const size_t at = jinja_template.find(kSet);
  if (at == std::string::npos) return "";
  std::string_view s = std::string_view(jinja_template).substr(at + kSet.size());
  std::string value;
  for (bool operand = true;; operand = !operand) {
    while (!s.empty() && absl::ascii_isspace(s.front())) s.remove_prefix(1);
    if (s.empty()) return "";
    if (!operand) {
      if (s.front() != '+') return s.substr(0, 2) == "%}" || s.substr(0, 3) == "-%}" ? value : "";
      s.remove_prefix(1);
    } else if (s.front() == '\'' || s.front() == '"') {
      if (!ConsumeJinjaString(&s, &value)) return "";
    } else if (s.substr(0, 5) == "today" &&
               (s.size() == 5 || !(absl::ascii_isalnum(s[5]) || s[5] == '_'))) {
      s.remove_prefix(5);
      value += date.empty() ? absl::FormatTime("%Y-%m-%d", absl::Now(), absl::UTCTimeZone()) : date;
    } else {
      return "";
    }
  }
}

}  // namespace waste::text
