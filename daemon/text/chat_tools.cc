#include "daemon/text/chat_tools.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/python_json.h"

namespace waste::text {
namespace {

using Json = nlohmann::ordered_json;

Json Parse(std::string_view text) {
  return Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

// Jinja's truthiness of spec[key]: absent, null, false, 0 and empty are false.
bool Truthy(const Json& spec, const char* key) {
  if (!spec.is_object() || !spec.contains(key)) return false;
  const Json& v = spec[key];
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  return true;
}

// A value as Python's str() writes it (Jinja's join and string concatenation).
std::string Str(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  return PythonJson(v);
}

// Whether `name` is in the schema's "required" list.
bool Required(const Json& schema, const std::string& name) {
  if (!schema.is_object() || !schema.contains("required") || !schema["required"].is_array()) {
    return false;
  }
  for (const Json& r : schema["required"]) {
    if (r == name) return true;
  }
  return false;
}

// gpt-oss's template's render_typescript_type: a JSON schema as the
// TypeScript type its tool namespace shows, whitespace quirks included.
std::string TypeScript(const Json& spec) {
  const Json none;
  const Json& type = spec.is_object() && spec.contains("type") ? spec["type"] : none;
  const char* nullable = Truthy(spec, "nullable") ? " | null" : "";
  if (type == "array") {
    if (!Truthy(spec, "items")) return absl::StrCat("any[]", nullable);
    const Json& items = spec["items"];
    const Json& item_type = items.is_object() && items.contains("type") ? items["type"] : none;
    std::string array;
    if (item_type == "string" || item_type == "boolean") {
      array = item_type.get<std::string>() + "[]";
    } else if (item_type == "number" || item_type == "integer") {
      array = "number[]";
    } else {
      const std::string inner = TypeScript(items);
      array = inner == "object | object" || inner.size() > 50 ? "any[]" : inner + "[]";
    }
    return array + nullable;
  }
  if (type.is_array() && !type.empty()) {
    std::string out;
    for (size_t i = 0; i < type.size(); ++i) absl::StrAppend(&out, i ? " | " : "", Str(type[i]));
    return out;
  }
  if (Truthy(spec, "oneOf")) {
    // (The template's object-variant check sets a variable inside its loop,
    // which Jinja scopes to the loop: every oneOf is listed.)
    std::string out;
    const Json& variants = spec["oneOf"];
    for (size_t i = 0; i < variants.size(); ++i) {
      out += TypeScript(variants[i]);
      if (Truthy(variants[i], "description")) out += "// " + Str(variants[i]["description"]);
      if (variants[i].is_object() && variants[i].contains("default")) {
        absl::StrAppend(&out, std::string(20, ' '),
                        "// default: ", PythonJson(variants[i]["default"]));
      }
      if (i + 1 < variants.size()) out += " | \n";
    }
    return out;
  }
  if (type == "string") {
    if (!Truthy(spec, "enum")) return absl::StrCat("string", nullable);
    std::string out = "\"";
    const Json& values = spec["enum"];
    for (size_t i = 0; i < values.size(); ++i)
      absl::StrAppend(&out, i ? "\" | \"" : "", Str(values[i]));
    return out + "\"";
  }
  if (type == "number" || type == "integer") return "number";
  if (type == "boolean") return "boolean";
  if (type == "object") {
    if (!Truthy(spec, "properties")) return "object";
    std::string out = "{\n";
    bool first = true;
    for (const auto& [name, property] : spec["properties"].items()) {
      absl::StrAppend(&out, first ? "" : ", ", name, Required(spec, name) ? "" : "?", ": \n",
                      std::string(16, ' '), TypeScript(property));
      first = false;
    }
    return out + "}";
  }
  return "any";
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

std::string QwenToolsText(std::string_view tools_json) {
  std::string out =
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
  for (const Json& tool : Parse(tools_json)) absl::StrAppend(&out, "\n", PythonJson(tool));
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
  for (const Json& tool : Parse(tools_json)) absl::StrAppend(&out, PythonJson(tool), "\n");
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
                    value.is_string() ? value.get<std::string>() : PythonJson(value),
                    "</arg_value>\n");
  }
  out += "</tool_call>";
  return out;
}

std::string HarmonyToolsNamespace(std::string_view tools_json) {
  std::string out = "## functions\n\nnamespace functions {\n\n";
  for (const Json& tool : Parse(tools_json)) {
    const Json& function = tool["function"];
    // (A tool without a description breaks the template; it gets no line.)
    if (Truthy(function, "description"))
      absl::StrAppend(&out, "// ", Str(function["description"]), "\n");
    absl::StrAppend(&out, "type ", function["name"].get<std::string>(), " = ");
    const Json none;
    const Json& parameters = function.contains("parameters") ? function["parameters"] : none;
    if (!Truthy(parameters, "properties")) {
      out += "() => any;\n\n";
      continue;
    }
    out += "(_: {\n";
    for (const auto& [name, spec] : parameters["properties"].items()) {
      if (Truthy(spec, "description")) absl::StrAppend(&out, "// ", Str(spec["description"]), "\n");
      absl::StrAppend(&out, name, Required(parameters, name) ? "" : "?", ": ", TypeScript(spec));
      if (spec.is_object() && spec.contains("default")) {
        const Json& value = spec["default"];
        if (Truthy(spec, "enum")) {
          absl::StrAppend(&out, ", // default: ", Str(value));
        } else if (Truthy(spec, "oneOf")) {
          absl::StrAppend(&out, "// default: ", Str(value));
        } else {
          absl::StrAppend(&out, ", // default: ", PythonJson(value));
        }
      }
      out += ",\n";
    }
    out += "}) => any;\n\n";
  }
  return out + "} // namespace functions";
}

std::string PythonJsonString(std::string_view text) { return PythonJson(Json(std::string(text))); }

std::string DeepSeekToolsText(std::string_view tools_json) {
  std::string out = "## Tools\nYou have access to the following tools:\n\n";
  for (const Json& tool : Parse(tools_json)) {
    const Json& function = tool["function"];
    absl::StrAppend(
        &out, "### ", function["name"].get<std::string>(),
        "\nDescription: ", function.contains("description") ? Str(function["description"]) : "",
        "\n\nParameters: ",
        function.contains("parameters") ? PythonJson(function["parameters"]) : "{}", "\n\n");
  }
  out +=
      "IMPORTANT: ALWAYS adhere to this exact format for tool use:\n"
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>tool_call_name<｜tool▁sep｜>tool_call_arguments"
      "<｜tool▁call▁end｜>{additional_tool_calls}<｜tool▁calls▁end｜>\n\nWhere:\n"
      "- `tool_call_name` must be an exact match to one of the available tools\n"
      "- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters "
      "Schema\n"
      "- For multiple tool calls, chain them directly without separators or spaces";
  return out;
}

std::string DeepSeekToolCalls(const std::vector<ToolCall>& calls) {
  std::string out = "<｜tool▁calls▁begin｜>";
  for (const ToolCall& call : calls) {
    absl::StrAppend(&out, "<｜tool▁call▁begin｜>", call.name, "<｜tool▁sep｜>", call.arguments,
                    "<｜tool▁call▁end｜>");
  }
  return out + "<｜tool▁calls▁end｜>";
}

std::string LlamaToolsTurn(std::string_view tools_json, std::string_view first_user_message) {
  std::string out =
      "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond "
      "with a JSON for a function call with its proper arguments that best answers the given "
      "prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": dictionary of "
      "argument name and its value}.Do not use variables.\n\n";
  for (const Json& tool : Parse(tools_json)) absl::StrAppend(&out, PythonJson(tool, 4), "\n\n");
  out.append(first_user_message).append("<|eot_id|>");
  return out;
}

std::string LlamaToolCall(const ToolCall& call) {
  return absl::StrCat("{\"name\": \"", call.name,
                      "\", \"parameters\": ", PythonJsonFromText(call.arguments), "}");
}

std::string MistralToolsText(std::string_view tools_json, bool spaced) {
  std::string out = spaced ? "[AVAILABLE_TOOLS] [" : "[AVAILABLE_TOOLS][";
  const Json tools = Parse(tools_json);
  for (size_t i = 0; i < tools.size(); ++i) {
    out += "{\"type\": \"function\", \"function\": {";
    bool first = true;
    for (const auto& [key, value] : tools[i]["function"].items()) {
      if (key == "return") continue;
      absl::StrAppend(&out, first ? "" : ", ", "\"", key, "\": ",
                      value.is_string() ? absl::StrCat("\"", value.get<std::string>(), "\"")
                                        : PythonJson(value));
      first = false;
    }
    out += i + 1 < tools.size() ? "}}, " : "}}]";
  }
  return out + "[/AVAILABLE_TOOLS]";
}

std::string MistralCallId(std::string_view id) {
  constexpr std::string_view kAlnum =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  if (id.size() == 9 && id.find_first_not_of(kAlnum) == std::string_view::npos) {
    return std::string(id);
  }
  uint64_t hash = 14695981039346656037ull;  // FNV-1a.
  for (char c : id) hash = (hash ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  std::string out;
  for (int i = 0; i < 9; ++i, hash /= kAlnum.size()) out += kAlnum[hash % kAlnum.size()];
  return out;
}

std::string MistralToolCalls(const std::vector<ToolCall>& calls, bool spaced) {
  std::string out = spaced ? "[TOOL_CALLS] [" : "[TOOL_CALLS][";
  for (size_t i = 0; i < calls.size(); ++i) {
    absl::StrAppend(&out, i > 0 ? ", " : "", "{\"name\": ", PythonJsonString(calls[i].name),
                    ", \"arguments\": ", PythonJsonFromText(calls[i].arguments), ", \"id\": \"",
                    MistralCallId(calls[i].id), "\"}");
  }
  return out + "]</s>";
}

std::string KimiToolsTurn(std::string_view tools_json) {
  return absl::StrCat("<|im_system|>tool_declare<|im_middle|>", PythonJsonFromText(tools_json),
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
