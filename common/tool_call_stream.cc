#include "common/tool_call_stream.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "common/harmony_stream.h"
#include "common/python_json.h"
#include "common/reasoning_stream.h"

namespace waste {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kSpace = " \t\r\n";

std::string_view Strip(std::string_view s) {
  const size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) - begin + 1);
}

Json ParseJson(std::string_view text) {
  return Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

// The arguments of a call as JSON text: an object, or a string holding one.
bool Arguments(const Json& value, std::string* out) {
  if (value.is_object()) {
    *out = PythonJson(value);
    return true;
  }
  if (value.is_string() && ParseJson(value.get<std::string>()).is_object()) {
    *out = value.get<std::string>();
    return true;
  }
  return false;
}

// A call body "HEAD<separator>ARGUMENTS" whose arguments are a JSON
// object, both trimmed; false when it is not that, or the head is empty.
bool HeadAndArguments(std::string_view body, std::string_view separator, std::string* head,
                      std::string* arguments) {
  const size_t split = body.find(separator);
  if (split == std::string_view::npos) return false;
  *head = Strip(body.substr(0, split));
  *arguments = Strip(body.substr(split + separator.size()));
  return !head->empty() && ParseJson(*arguments).is_object();
}

// The text between `open` and `close` at or after *at; advances *at past it.
bool Between(std::string_view s, std::string_view open, std::string_view close, size_t* at,
             std::string_view* out) {
  const size_t begin = s.find(open, *at);
  if (begin == std::string_view::npos) return false;
  const size_t end = s.find(close, begin + open.size());
  if (end == std::string_view::npos) return false;
  *out = s.substr(begin + open.size(), end - begin - open.size());
  *at = end + close.size();
  return true;
}

constexpr std::string_view kPythonTag = "<|python_tag|>";

// Where the JSON object starting at `at` ends (one past its closing
// brace), or npos when it does not close.
size_t ObjectEnd(std::string_view s, size_t at) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = at; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// Llama 3's calls: {"name": N, "parameters": {...}} objects (a "type" of
// "function" and "arguments" for "parameters" accepted), separated by ";"
// or whitespace, and nothing else.
bool JsonCalls(std::string_view text, std::vector<ToolCall>* calls) {
  size_t at = 0;
  for (;;) {
    at = text.find_first_not_of(" \t\r\n;", at);
    if (at == std::string_view::npos) return !calls->empty();
    const size_t end = text[at] == '{' ? ObjectEnd(text, at) : std::string_view::npos;
    if (end == std::string_view::npos) return false;
    const Json json = ParseJson(text.substr(at, end - at));
    if (!json.is_object()) return false;
    ToolCall call;
    call.arguments = "{}";
    for (const auto& [key, value] : json.items()) {
      if (key == "name" && value.is_string()) {
        call.name = value.get<std::string>();
      } else if (key == "type" && value == "function") {
      } else if (!((key == "parameters" || key == "arguments") &&
                   Arguments(value, &call.arguments))) {
        return false;
      }
    }
    if (call.name.empty()) return false;
    calls->push_back(std::move(call));
    at = end;
  }
}

}  // namespace

ToolCallSplitter::ToolCallSplitter(ToolFormat format, std::string_view tools_json)
    : format_(format) {
  switch (format) {
    case ToolFormat::kHermes:
    case ToolFormat::kGlm:
      markers_ = {.call_begin = "<tool_call>", .call_end = "</tool_call>"};
      break;
    case ToolFormat::kKimiK2:
      markers_ = {.section_begin = "<|tool_calls_section_begin|>",
                  .section_end = "<|tool_calls_section_end|>",
                  .call_begin = "<|tool_call_begin|>",
                  .call_end = "<|tool_call_end|>"};
      break;
    case ToolFormat::kDeepSeekV31:
      markers_ = {.section_begin = "<｜tool▁calls▁begin｜>",
                  .section_end = "<｜tool▁calls▁end｜>",
                  .call_begin = "<｜tool▁call▁begin｜>",
                  .call_end = "<｜tool▁call▁end｜>"};
      break;
    case ToolFormat::kMistral:  // The calls run to the end of the reply.
      markers_ = {.call_begin = "[TOOL_CALLS]"};
      break;
    case ToolFormat::kLlama3Json:
      break;
    case ToolFormat::kNone:
    case ToolFormat::kHarmony:  // The harmony splitter takes those calls out.
      format_ = ToolFormat::kNone;
      break;
  }
  if (format != ToolFormat::kGlm) return;
  const Json tools = ParseJson(tools_json);
  if (!tools.is_array()) return;
  for (const Json& tool : tools) {
    const Json* function =
        tool.is_object() && tool.contains("function") ? &tool["function"] : &tool;
    if (!function->is_object() || !function->contains("name") || !(*function)["name"].is_string() ||
        !function->contains("parameters")) {
      continue;
    }
    const Json& parameters = (*function)["parameters"];
    if (!parameters.is_object() || !parameters.contains("properties") ||
        !parameters["properties"].is_object()) {
      continue;
    }
    for (const auto& [key, schema] : parameters["properties"].items()) {
      if (schema.is_object() && schema.contains("type") && schema["type"] == "string") {
        string_parameters_.emplace((*function)["name"].get<std::string>(), key);
      }
    }
  }
}

ToolCallSplitter::Parts ToolCallSplitter::Add(std::string_view text) {
  Parts out;
  if (format_ == ToolFormat::kNone) {
    out.content = text;
    return out;
  }
  pending_.append(text);
  if (format_ == ToolFormat::kLlama3Json) {
    StepJsonReply(/*last=*/false, &out);
  } else {
    Step(/*last=*/false, &out);
  }
  return out;
}

ToolCallSplitter::Parts ToolCallSplitter::Finish() {
  Parts out;
  if (format_ == ToolFormat::kLlama3Json) {
    StepJsonReply(/*last=*/true, &out);
  } else if (format_ != ToolFormat::kNone) {
    Step(/*last=*/true, &out);
  }
  return out;
}

void ToolCallSplitter::StepJsonReply(bool last, Parts* out) {
  // After whitespace and the python tag, if any.
  std::string_view view = pending_;
  auto skip_space = [&view] {
    view.remove_prefix(std::min(view.find_first_not_of(kSpace), view.size()));
  };
  skip_space();
  if (view.starts_with(kPythonTag)) {
    view.remove_prefix(kPythonTag.size());
    skip_space();
  }
  if (json_reply_ == JsonReply::kUndecided) {
    // "{" and a first key of "name" or "type": a call; anything else is
    // content.
    std::optional<bool> call;  // Unset: not known yet.
    if (!view.empty() && !kPythonTag.starts_with(view)) {
      const size_t quote = view.find_first_not_of(kSpace, 1);
      if (view.front() != '{') {
        call = false;
      } else if (quote != std::string_view::npos) {
        const size_t close = view.find('"', quote + 1);
        if (view[quote] != '"') {
          call = false;
        } else if (close != std::string_view::npos) {
          const std::string_view key = view.substr(quote + 1, close - quote - 1);
          call = key == "name" || key == "type";
        }
      }
    }
    if (!call.has_value() && !last) return;
    json_reply_ = call.value_or(false) ? JsonReply::kCalls : JsonReply::kContent;
  }
  if (json_reply_ == JsonReply::kCalls) {
    if (!last) return;
    // A reply that does not parse as calls is content, python tag and all.
    std::vector<ToolCall> calls;
    if (JsonCalls(view, &calls)) {
      for (ToolCall& c : calls) out->calls.push_back(std::move(c));
      pending_.clear();
      return;
    }
  }
  out->content.append(pending_);
  pending_.clear();
}

size_t ToolCallSplitter::FindOpening(size_t* length) const {
  size_t at = pending_.find(markers_.call_begin);
  *length = markers_.call_begin.size();
  if (!markers_.section_begin.empty()) {
    const size_t section = pending_.find(markers_.section_begin);
    if (section < at) {
      at = section;
      *length = markers_.section_begin.size();
    }
  }
  return at;
}

void ToolCallSplitter::Step(bool last, Parts* out) {
  const Markers& m = markers_;
  for (;;) {
    std::string_view pending = pending_;
    switch (state_) {
      case State::kText: {
        size_t length = 0;
        const size_t at = FindOpening(&length);
        if (at == std::string::npos) {
          const size_t keep = last ? 0
                                   : std::max(PartialMarkerLength(pending, m.call_begin),
                                              PartialMarkerLength(pending, m.section_begin));
          out->content.append(pending.substr(0, pending.size() - keep));
          pending_.erase(0, pending.size() - keep);
          return;
        }
        out->content.append(pending.substr(0, at));
        in_section_ = pending.substr(at, length) == m.section_begin;
        pending_.erase(0, at + length);
        state_ = in_section_ ? State::kBetween : State::kCall;
        break;
      }
      case State::kBetween: {
        // Whitespace between calls (and after the last) is not content.
        const size_t text = pending.find_first_not_of(kSpace);
        if (text == std::string_view::npos) {
          pending_.clear();
          return;
        }
        pending_.erase(0, text);
        pending = pending_;
        if (pending.starts_with(m.call_begin)) {
          pending_.erase(0, m.call_begin.size());
          state_ = State::kCall;
        } else if (in_section_ && pending.starts_with(m.section_end)) {
          pending_.erase(0, m.section_end.size());
          in_section_ = false;
          state_ = State::kText;
        } else if (!last && (m.call_begin.starts_with(pending) ||
                             (in_section_ && m.section_end.starts_with(pending)))) {
          return;  // A marker cut between two pieces.
        } else {
          in_section_ = false;
          state_ = State::kText;
        }
        break;
      }
      case State::kCall: {
        const size_t end = m.call_end.empty() ? std::string_view::npos : pending.find(m.call_end);
        if (end == std::string_view::npos && !last) return;
        const std::string_view body = pending.substr(0, end);
        const bool parsed = ParseCalls(body, &out->calls);
        if (!parsed) {
          out->content.append(m.call_begin).append(body);
          if (end != std::string_view::npos) out->content.append(m.call_end);
        }
        pending_.erase(0, end == std::string_view::npos ? pending.size() : end + m.call_end.size());
        // After a call, whitespace before the next is not content; after a
        // block that did not parse, everything is.
        state_ = parsed ? State::kBetween : State::kText;
        break;
      }
    }
  }
}

bool ToolCallSplitter::ParseCalls(std::string_view body, std::vector<ToolCall>* calls) const {
  if (format_ != ToolFormat::kMistral) {
    ToolCall call;
    if (!ParseCall(body, &call)) return false;
    calls->push_back(std::move(call));
    return true;
  }
  // [{"name": N, "arguments": {...}, "id": I}, ...]
  const Json json = ParseJson(Strip(body));
  if (!json.is_array() || json.empty()) return false;
  std::vector<ToolCall> parsed;
  for (const Json& item : json) {
    ToolCall& call = parsed.emplace_back();
    call.arguments = "{}";
    if (!item.is_object() || !item.contains("name") || !item["name"].is_string()) return false;
    call.name = item["name"].get<std::string>();
    if (item.contains("arguments") && !Arguments(item["arguments"], &call.arguments)) return false;
    if (item.contains("id") && item["id"].is_string()) call.id = item["id"].get<std::string>();
    if (call.name.empty()) return false;
  }
  for (ToolCall& call : parsed) calls->push_back(std::move(call));
  return true;
}

bool ToolCallSplitter::ParseCall(std::string_view body, ToolCall* call) const {
  switch (format_) {
    case ToolFormat::kHermes: {
      const Json json = ParseJson(Strip(body));
      if (!json.is_object() || !json.contains("name") || !json["name"].is_string()) return false;
      call->name = json["name"].get<std::string>();
      if (!json.contains("arguments")) {
        call->arguments = "{}";
      } else if (!Arguments(json["arguments"], &call->arguments)) {
        return false;
      }
      return !call->name.empty();
    }
    case ToolFormat::kGlm:
      return ParseGlmCall(body, call);
    case ToolFormat::kKimiK2: {
      // functions.NAME:INDEX<|tool_call_argument_begin|>{...}: the head is
      // the call's id.
      if (!HeadAndArguments(body, "<|tool_call_argument_begin|>", &call->id, &call->arguments)) {
        return false;
      }
      std::string_view name = call->id;
      if (name.starts_with("functions.")) name.remove_prefix(10);
      if (const size_t colon = name.rfind(':'); colon != std::string_view::npos) {
        name = name.substr(0, colon);
      }
      call->name = name;
      return !call->name.empty();
    }
    case ToolFormat::kDeepSeekV31:
      // NAME<｜tool▁sep｜>{...}
      return HeadAndArguments(body, "<｜tool▁sep｜>", &call->name, &call->arguments);
    case ToolFormat::kNone:
    case ToolFormat::kHarmony:
    case ToolFormat::kLlama3Json:  // StepJsonReply's.
    case ToolFormat::kMistral:     // ParseCalls'.
      break;
  }
  return false;
}

bool ToolCallSplitter::ParseGlmCall(std::string_view body, ToolCall* call) const {
  constexpr std::string_view kKey = "<arg_key>", kKeyEnd = "</arg_key>";
  constexpr std::string_view kValue = "<arg_value>", kValueEnd = "</arg_value>";
  const size_t first_key = body.find(kKey);
  call->name = Strip(body.substr(0, first_key));
  if (call->name.empty() || call->name.find_first_of("<>\n") != std::string::npos) return false;
  Json arguments = Json::object();
  size_t at = first_key == std::string_view::npos ? body.size() : first_key;
  std::string_view key, value;
  while (at < body.size() && Between(body, kKey, kKeyEnd, &at, &key)) {
    if (!Between(body, kValue, kValueEnd, &at, &value)) return false;
    const std::string name(Strip(key));
    // As the template writes them: strings raw, anything else as JSON.
    Json parsed;
    if (!string_parameters_.contains({call->name, name})) parsed = ParseJson(value);
    arguments[name] = parsed.is_discarded() || (parsed.is_null() && Strip(value) != "null")
                          ? Json(std::string(value))
                          : parsed;
  }
  if (!Strip(body.substr(at)).empty()) return false;
  call->arguments = PythonJson(arguments);
  return true;
}

std::vector<ToolCall> ReplyToolCalls(std::string_view reply, bool reasoning_open, ToolFormat format,
                                     std::string_view tools_json) {
  ReasoningSplitter reasoning(reasoning_open);
  ReasoningSplitter::Parts parts = reasoning.Add(reply);
  ReasoningSplitter::Parts rest = reasoning.Finish();
  parts.content += rest.content;
  std::vector<ToolCall> found = std::move(parts.calls);
  for (ToolCall& call : rest.calls) found.push_back(std::move(call));
  ToolCallSplitter splitter(format, tools_json);
  for (ToolCallSplitter::Parts p : {splitter.Add(parts.content), splitter.Finish()}) {
    for (ToolCall& call : p.calls) found.push_back(std::move(call));
  }
  std::vector<ToolCall> calls;
  for (ToolCall& call : found) {
    if (ParseJson(call.arguments).is_object()) calls.push_back(std::move(call));
  }
  return calls;
}

}  // namespace waste
