#include "daemon/text/chat_tools.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace waste::text {
namespace {

using Json = nlohmann::ordered_json;

Json Parse(std::string_view text) {
  return Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

void Write(const Json& json, std::string* out) {
  if (json.is_object()) {
    out->push_back('{');
    bool first = true;
    for (const auto& [key, value] : json.items()) {
      absl::StrAppend(out, first ? "" : ", ",
                      Json(key).dump(-1, ' ', false, Json::error_handler_t::replace), ": ");
      Write(value, out);
      first = false;
    }
    out->push_back('}');
  } else if (json.is_array()) {
    out->push_back('[');
    for (size_t i = 0; i < json.size(); ++i) {
      if (i > 0) out->append(", ");
      Write(json[i], out);
    }
    out->push_back(']');
  } else {
    out->append(json.dump(-1, ' ', false, Json::error_handler_t::replace));
  }
}

std::string Python(const Json& json) {
  std::string out;
  Write(json, &out);
  return out;
}

}  // namespace

absl::Status CheckTools(std::string_view tools_json) {
  const Json tools = Parse(tools_json);
  if (!tools.is_array()) return absl::InvalidArgumentError("tools must be a JSON array");
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& tool = tools[i];
    const std::string name = absl::StrCat("tools[", i, "]");
    if (!tool.is_object() || !tool.contains("type") || tool["type"] != "function") {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " must be an object of type \"function\""));
    }
    if (!tool.contains("function") || !tool["function"].is_object() ||
        !tool["function"].contains("name") || !tool["function"]["name"].is_string() ||
        tool["function"]["name"].get<std::string>().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ".function.name must be a non-empty string"));
    }
    const Json& function = tool["function"];
    if (function.contains("parameters") && !function["parameters"].is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ".function.parameters must be an object"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckToolCall(const ToolCall& call) {
  if (call.name.empty()) return absl::InvalidArgumentError("a tool call has no name");
  if (!Parse(call.arguments).is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the arguments of the call of ", call.name, " are not a JSON object"));
  }
  return absl::OkStatus();
}

std::string PythonJson(std::string_view json) { return Python(Parse(json)); }

std::string QwenToolsText(std::string_view tools_json) {
  std::string out =
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
  for (const Json& tool : Parse(tools_json)) absl::StrAppend(&out, "\n", Python(tool));
  out +=
      "\n</tools>\n\nFor each function call, return a json object with function name and "
      "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
      "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
  return out;
}

std::string QwenToolCall(const ToolCall& call) {
  return absl::StrCat("<tool_call>\n{\"name\": \"", call.name,
                      "\", \"arguments\": ", call.arguments, "}\n</tool_call>");
}

std::string GlmToolsTurn(std::string_view tools_json) {
  std::string out =
      "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user "
      "query.\n\nYou are provided with function signatures within <tools></tools> XML "
      "tags:\n<tools>\n";
  for (const Json& tool : Parse(tools_json)) absl::StrAppend(&out, Python(tool), "\n");
  out +=
      "</tools>\n\nFor each function call, output the function name and arguments within the "
      "following XML format:\n<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n"
      "<arg_value>{arg-value-1}</arg_value>\n<arg_key>{arg-key-2}</arg_key>\n"
      "<arg_value>{arg-value-2}</arg_value>\n...\n</tool_call>";
  return out;
}

std::string GlmToolCall(const ToolCall& call) {
  std::string out = absl::StrCat("<tool_call>", call.name, "\n");
  const Json arguments = Parse(call.arguments);
  for (const auto& [key, value] : arguments.items()) {
    absl::StrAppend(&out, "<arg_key>", key, "</arg_key>\n<arg_value>",
                    value.is_string() ? value.get<std::string>() : Python(value), "</arg_value>\n");
  }
  out += "</tool_call>";
  return out;
}

std::string KimiToolsTurn(std::string_view tools_json) {
  return absl::StrCat("<|im_system|>tool_declare<|im_middle|>", PythonJson(tools_json),
                      "<|im_end|>");
}

std::string KimiToolCalls(const std::vector<ToolCall>& calls) {
  std::string out = "<|tool_calls_section_begin|>";
  for (const ToolCall& call : calls) {
    absl::StrAppend(&out, "<|tool_call_begin|>", call.id, "<|tool_call_argument_begin|>",
                    call.arguments, "<|tool_call_end|>");
  }
  out += "<|tool_calls_section_end|>";
  return out;
}

}  // namespace waste::text
