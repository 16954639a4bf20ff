#include "daemon/http/openai_request.h"

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/python_json.h"
#include "daemon/text/chat_tools.h"

namespace waste::http {
namespace {

// Ordered: tools reach the model's prompt with their keys as the client
// wrote them, as Jinja renders them.
using Json = nlohmann::ordered_json;

// Whether `body` nests arrays/objects deeper than kMaxJsonDepth. Checked
// before parsing so a hostile body cannot make the parser (or the tree's
// destructor) recurse deeply.
bool TooDeep(absl::string_view body) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

std::string TypeName(const Json& v) { return v.type_name(); }

// Reads fields of one request; the first error wins and is kept.
class FieldReader {
 public:
  explicit FieldReader(ApiError* error) : error_(error) {}

  bool Fail(std::string message, std::string param) {
    *error_ = BadRequest(std::move(message), std::move(param));
    return false;
  }

  bool Bool(const Json& v, const std::string& name, bool* out) {
    if (!v.is_boolean()) {
      return Fail(absl::StrCat(name, " must be true or false, not ", TypeName(v)), name);
    }
    *out = v.get<bool>();
    return true;
  }

  // An integer in [lo, hi]; 16.0 counts as 16.
  bool Int(const Json& v, const std::string& name, int64_t lo, int64_t hi, int64_t* out) {
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        return Fail(absl::StrCat(name, " is too large"), name);
      }
      const int64_t i = v.get<int64_t>();
      if (i < lo || i > hi) return OutOfRange(name, lo, hi);
      *out = i;
      return true;
    }
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (std::floor(d) != d) return Fail(absl::StrCat(name, " must be an integer"), name);
      if (d < static_cast<double>(lo) || d > static_cast<double>(hi))
        return OutOfRange(name, lo, hi);
      *out = static_cast<int64_t>(d);
      return true;
    }
    return Fail(absl::StrCat(name, " must be an integer, not ", TypeName(v)), name);
  }

  // A number in [lo, hi] (or (lo, hi] when `lo_open`).
  bool Number(const Json& v, const std::string& name, double lo, double hi, bool lo_open,
              double* out) {
    if (!v.is_number()) {
      return Fail(absl::StrCat(name, " must be a number, not ", TypeName(v)), name);
    }
    const double d = v.get<double>();
    if (!std::isfinite(d) || d > hi || d < lo || (lo_open && d == lo)) {
      return Fail(
          absl::StrCat(name, " must be in ", lo_open ? "(" : "[", lo, ", ", hi, "], not ", d),
          name);
    }
    *out = d;
    return true;
  }

  bool String(const Json& v, const std::string& name, std::string* out) {
    if (!v.is_string()) {
      return Fail(absl::StrCat(name, " must be a string, not ", TypeName(v)), name);
    }
    *out = v.get<std::string>();
    return true;
  }

 private:
  bool OutOfRange(const std::string& name, int64_t lo, int64_t hi) {
    return Fail(hi == INT32_MAX ? absl::StrCat(name, " must be at least ", lo)
                                : absl::StrCat(name, " must be in ", lo, "..", hi),
                name);
  }

  ApiError* error_;
};

// A chat message's content: a string, or an array of {"type": "text",
// "text": ...} parts, joined.
bool MessageContent(FieldReader& reader, const Json& v, const std::string& name, std::string* out) {
  if (v.is_null()) return true;  // An assistant turn that only called tools.
  if (v.is_string()) {
    *out = v.get<std::string>();
    return true;
  }
  if (!v.is_array()) {
    return reader.Fail(absl::StrCat(name, " must be a string or an array of text parts"), name);
  }
  for (size_t i = 0; i < v.size(); ++i) {
    const Json& part = v[i];
    const std::string part_name = absl::StrCat(name, "[", i, "]");
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
        !part.contains("text") || !part["text"].is_string()) {
      return reader.Fail(
          absl::StrCat(part_name, ": only {\"type\": \"text\", \"text\": ...} parts are supported"),
          part_name);
    }
    *out += part["text"].get<std::string>();
  }
  return true;
}

// An assistant message's calls: [{"id", "type": "function", "function":
// {"name", "arguments": a JSON object as text (or the object)}}].
bool ToolCalls(FieldReader& reader, const Json& v, const std::string& name,
               v1::ChatMessage* message) {
  if (!v.is_array()) return reader.Fail(absl::StrCat(name, " must be an array"), name);
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string call_name = absl::StrCat(name, "[", i, "]");
    const Json& c = v[i];
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) {
      return reader.Fail(absl::StrCat(call_name,
                                      " must be {\"type\": \"function\", \"function\": "
                                      "{\"name\", \"arguments\"}}"),
                         call_name);
    }
    v1::ToolCall* call = message->add_tool_calls();
    if (c.contains("id") && !c["id"].is_null() &&
        !reader.String(c["id"], call_name + ".id", call->mutable_id())) {
      return false;
    }
    const Json& function = c["function"];
    if (!function.contains("name") ||
        !reader.String(function["name"], call_name + ".function.name", call->mutable_name())) {
      return reader.Fail(absl::StrCat(call_name, ".function.name must be a string"),
                         call_name + ".function.name");
    }
    // A string as the client sent it (templates write it as it is; none or
    // blank: no arguments); an object as the templates' tojson writes one.
    const Json none;
    const Json& arguments = function.contains("arguments") ? function["arguments"] : none;
    if (arguments.is_string()) {
      const std::string& text = arguments.get_ref<const std::string&>();
      call->set_arguments(text.find_first_not_of(" \t\r\n") == std::string::npos ? "{}" : text);
    } else {
      call->set_arguments(arguments.is_null() ? "{}" : PythonJson(arguments));
    }
    if (const absl::Status checked =
            text::CheckToolCall({call->id(), call->name(), call->arguments()});
        !checked.ok()) {
      return reader.Fail(absl::StrCat(call_name, ": ", checked.message()), call_name);
    }
  }
  return true;
}

bool Messages(FieldReader& reader, const Json& v, v1::ChatMessages* chat) {
  if (!v.is_array() || v.empty()) {
    return reader.Fail("messages must be a non-empty array of {role, content}", "messages");
  }
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string name = absl::StrCat("messages[", i, "]");
    const Json& m = v[i];
    if (!m.is_object()) return reader.Fail(absl::StrCat(name, " must be an object"), name);
    v1::ChatMessage* message = chat->add_messages();
    if (!m.contains("role"))
      return reader.Fail(absl::StrCat(name, ".role is missing"), name + ".role");
    if (!reader.String(m["role"], name + ".role", message->mutable_role())) return false;
    // OpenAI's newer name for the system role.
    if (message->role() == "developer") message->set_role("system");
    if (m.contains("content")) {
      if (!MessageContent(reader, m["content"], name + ".content", message->mutable_content())) {
        return false;
      }
    }
    if (m.contains("tool_calls") && !m["tool_calls"].is_null() &&
        !ToolCalls(reader, m["tool_calls"], name + ".tool_calls", message)) {
      return false;
    }
    if (m.contains("tool_call_id") && !m["tool_call_id"].is_null() &&
        !reader.String(m["tool_call_id"], name + ".tool_call_id",
                       message->mutable_tool_call_id())) {
      return false;
    }
  }
  return true;
}

// The tools a request offers: checked, and kept as the client wrote them.
bool Tools(FieldReader& reader, const Json& v, v1::ChatMessages* chat) {
  if (!v.is_array()) return reader.Fail("tools must be an array", "tools");
  if (v.empty()) return true;
  const std::string tools = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (const absl::Status checked = text::CheckTools(tools); !checked.ok()) {
    return reader.Fail(std::string(checked.message()), "tools");
  }
  chat->set_tools(tools);
  return true;
}

bool Stop(FieldReader& reader, const Json& v, v1::GenerateRequest* generate) {
  if (v.is_null()) return true;
  if (v.is_string()) {
    if (!v.get<std::string>().empty()) generate->add_stop(v.get<std::string>());
    return true;
  }
  if (!v.is_array()) return reader.Fail("stop must be a string or an array of strings", "stop");
  if (v.size() > kMaxStopSequences) {
    return reader.Fail(absl::StrCat("stop has ", v.size(), " sequences; at most ",
                                    kMaxStopSequences, " are allowed"),
                       "stop");
  }
  for (const Json& s : v) {
    if (!s.is_string()) return reader.Fail("stop must be a string or an array of strings", "stop");
    if (!s.get<std::string>().empty()) generate->add_stop(s.get<std::string>());
  }
  return true;
}

// The completion prompt: a string, or an array holding one string.
bool Prompt(FieldReader& reader, const Json& v, v1::GenerateRequest* generate) {
  if (v.is_null()) {
    generate->set_prompt("");
    return true;
  }
  if (v.is_string()) {
    generate->set_prompt(v.get<std::string>());
    return true;
  }
  if (v.is_array() && v.size() == 1 && v[0].is_string()) {
    generate->set_prompt(v[0].get<std::string>());
    return true;
  }
  if (v.is_array() && v.size() > 1) {
    return reader.Fail("prompt: only one prompt per request is supported", "prompt");
  }
  return reader.Fail("prompt must be a string (token id arrays are not supported)", "prompt");
}

// gpt-oss's reasoning effort: low, medium or high.
bool ReasoningEffort(FieldReader& reader, const Json& v, const std::string& name,
                     v1::ChatMessages* chat) {
  if (!v.is_string() || (v != "low" && v != "medium" && v != "high")) {
    return reader.Fail(absl::StrCat(name, " must be \"low\", \"medium\" or \"high\""), name);
  }
  chat->set_reasoning_effort(v.get<std::string>());
  return true;
}

// The template variables a request may set: enable_thinking (Qwen3,
// GLM-4.5), thinking (DeepSeek-V3.1; the same switch) and reasoning_effort
// (gpt-oss).
bool TemplateKwargs(FieldReader& reader, const Json& v, v1::ChatMessages* chat) {
  const std::string name = "chat_template_kwargs";
  if (!v.is_object()) return reader.Fail(absl::StrCat(name, " must be an object"), name);
  for (const auto& [key, value] : v.items()) {
    const std::string field = absl::StrCat(name, ".", key);
    if (key == "enable_thinking" || key == "thinking") {  // Qwen3/GLM's; DeepSeek-V3.1's.
      bool thinking = true;
      if (!reader.Bool(value, field, &thinking)) return false;
      chat->set_thinking(thinking);
    } else if (key == "reasoning_effort") {
      if (!ReasoningEffort(reader, value, field, chat)) return false;
    } else {
      return reader.Fail(absl::StrCat(field,
                                      " is not supported (enable_thinking and "
                                      "reasoning_effort are)"),
                         field);
    }
  }
  return true;
}

// Fields OpenAI clients send that do not change what is generated.
bool Ignored(const std::string& key) {
  return key == "user" || key == "store" || key == "metadata" || key == "service_tier" ||
         key == "parallel_tool_calls" || key == "stream_options";
}

}  // namespace

bool ParseCompletionRequest(ApiKind kind, absl::string_view body, CompletionRequest* request,
                            ApiError* error) {
  FieldReader reader(error);
  if (TooDeep(body)) {
    return reader.Fail(absl::StrCat("the body nests deeper than ", kMaxJsonDepth, " levels"), "");
  }
  const Json root = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return reader.Fail("the body is not valid JSON", "");
  if (!root.is_object()) return reader.Fail("the body must be a JSON object", "");

  *request = CompletionRequest();
  request->kind = kind;
  v1::GenerateRequest& generate = request->generate;
  v1::SamplingParams& sampling = *generate.mutable_sampling();
  const bool chat = kind == ApiKind::kChat;
  std::optional<int64_t> max_tokens;
  int64_t top_logprobs = 0;
  bool top_logprobs_set = false;
  bool has_input = false;
  bool tools_offered = true;  // tool_choice "none": the model sees no tools.
  // Each request reuses the KV cache of the earlier one that shares the
  // longest prefix with it (llama.cpp's cache_prompt, also on by default).
  generate.set_cache_prompt(true);

  for (const auto& [key, v] : root.items()) {
    // Explicit nulls mean "unset" for every optional field.
    if (v.is_null() && key != "messages" && key != "prompt") continue;
    if (key == "model") {
      if (!reader.String(v, key, generate.mutable_model())) return false;
    } else if (chat && key == "messages") {
      has_input = true;
      if (!Messages(reader, v, generate.mutable_chat())) return false;
    } else if (!chat && key == "prompt") {
      has_input = true;
      if (!Prompt(reader, v, &generate)) return false;
    } else if (key == "max_tokens" || (chat && key == "max_completion_tokens")) {
      int64_t n = 0;
      if (!reader.Int(v, key, 1, INT32_MAX, &n)) return false;
      // max_completion_tokens is the newer name; it wins when both are set.
      if (!max_tokens.has_value() || key == "max_completion_tokens") max_tokens = n;
    } else if (key == "temperature") {
      double t = 0;
      if (!reader.Number(v, key, 0, 2, false, &t)) return false;
      sampling.set_temperature(static_cast<float>(t));
    } else if (key == "top_p") {
      double p = 0;
      if (!reader.Number(v, key, 0, 1, true, &p)) return false;
      sampling.set_top_p(static_cast<float>(p));
    } else if (key == "seed") {
      int64_t seed = 0;
      if (!reader.Int(v, key, 0, INT64_MAX, &seed)) return false;
      sampling.set_seed(static_cast<uint64_t>(seed));
    } else if (key == "frequency_penalty" || key == "presence_penalty") {
      double p = 0;
      if (!reader.Number(v, key, -2, 2, false, &p)) return false;
      if (key == "frequency_penalty") {
        sampling.set_frequency_penalty(static_cast<float>(p));
      } else {
        sampling.set_presence_penalty(static_cast<float>(p));
      }
      // OpenAI's penalties look at the whole text so far.
      sampling.set_penalty_last_n(-1);
    } else if (key == "top_k") {  // Extension (llama.cpp, vLLM).
      int64_t k = 0;
      if (!reader.Int(v, key, 0, INT32_MAX, &k)) return false;
      sampling.set_top_k(static_cast<int32_t>(k));
    } else if (key == "min_p") {  // Extension.
      double p = 0;
      if (!reader.Number(v, key, 0, 1, false, &p)) return false;
      sampling.set_min_p(static_cast<float>(p));
    } else if (key == "repetition_penalty") {  // Extension.
      double p = 0;
      if (!reader.Number(v, key, 0, 10, true, &p)) return false;
      sampling.set_repetition_penalty(static_cast<float>(p));
    } else if (key == "stop") {
      if (!Stop(reader, v, &generate)) return false;
    } else if (key == "n" || (!chat && key == "best_of")) {
      int64_t n = 0;
      if (!reader.Int(v, key, 1, INT32_MAX, &n)) return false;
      if (n != 1) {
        return reader.Fail(
            absl::StrCat(key, " = ", n, " is not supported: only 1 choice per request"), key);
      }
    } else if (key == "stream") {
      if (!reader.Bool(v, key, &request->stream)) return false;
    } else if (chat && key == "logprobs") {
      if (!reader.Bool(v, key, &request->logprobs)) return false;
    } else if (chat && key == "top_logprobs") {
      if (!reader.Int(v, key, 0, 20, &top_logprobs)) return false;
      top_logprobs_set = true;
    } else if (!chat && key == "logprobs") {
      // Completions: the number of alternatives, which also turns logprobs on.
      if (!reader.Int(v, key, 0, 20, &top_logprobs)) return false;
      request->logprobs = true;
    } else if (!chat && key == "echo") {
      bool echo = false;
      if (!reader.Bool(v, key, &echo)) return false;
      if (echo) return reader.Fail("echo = true is not supported", key);
    } else if (!chat && key == "suffix") {
      if (!v.is_string() || !v.get<std::string>().empty()) {
        return reader.Fail("suffix (insertion) is not supported", key);
      }
    } else if (key == "logit_bias") {
      if (!v.is_object() || !v.empty()) return reader.Fail("logit_bias is not supported", key);
    } else if (chat && key == "tools") {
      if (!Tools(reader, v, generate.mutable_chat())) return false;
    } else if (chat && key == "tool_choice") {
      // "required" and naming a function would need constrained decoding.
      if (!(v.is_string() && (v == "none" || v == "auto"))) {
        return reader.Fail("tool_choice: only \"auto\" and \"none\" are supported", key);
      }
      tools_offered = v == "auto";
    } else if (chat && (key == "functions" || key == "function_call")) {
      if (key == "functions" ? !v.is_array() || !v.empty()
                             : !(v.is_string() && (v == "none" || v == "auto"))) {
        return reader.Fail(absl::StrCat(key,
                                        " (OpenAI's deprecated form) is not supported: "
                                        "use tools"),
                           key);
      }
    } else if (key == "cache_prompt") {  // Extension (llama.cpp).
      bool cache = true;
      if (!reader.Bool(v, key, &cache)) return false;
      generate.set_cache_prompt(cache);
    } else if (chat && key == "reasoning_format") {  // Extension (llama.cpp).
      if (!v.is_string() || (v != "none" && v != "auto" && v != "deepseek")) {
        return reader.Fail("reasoning_format must be \"none\", \"auto\" or \"deepseek\"", key);
      }
      request->split_reasoning = v != "none";
    } else if (chat && key == "reasoning_effort") {
      if (!ReasoningEffort(reader, v, key, generate.mutable_chat())) return false;
    } else if (chat && key == "chat_template_kwargs") {  // Extension (llama.cpp, vLLM).
      if (!TemplateKwargs(reader, v, generate.mutable_chat())) return false;
    } else if (chat && key == "response_format") {
      if (!v.is_object() || !v.contains("type") || v["type"] != "text") {
        return reader.Fail("response_format: only {\"type\": \"text\"} is supported", key);
      }
    } else if (Ignored(key)) {
      continue;
    } else {
      return reader.Fail(absl::StrCat("unsupported field '", key, "'"), key);
    }
  }

  if (chat && !tools_offered) generate.mutable_chat()->clear_tools();
  if (!has_input) {
    if (chat) return reader.Fail("messages is required", "messages");
    // OpenAI's completions start from the beginning of a document when no
    // prompt is given; here that is the BOS token.
    generate.set_prompt("");
  }
  if (chat && top_logprobs_set && top_logprobs > 0 && !request->logprobs) {
    return reader.Fail("top_logprobs requires logprobs = true", "top_logprobs");
  }
  if (request->logprobs) generate.set_top_logprobs(static_cast<int32_t>(top_logprobs));
  if (request->stream && root.contains("stream_options") && !root["stream_options"].is_null()) {
    const Json& options = root["stream_options"];
    if (!options.is_object())
      return reader.Fail("stream_options must be an object", "stream_options");
    if (options.contains("include_usage") && !options["include_usage"].is_null() &&
        !reader.Bool(options["include_usage"], "stream_options.include_usage",
                     &request->include_usage)) {
      return false;
    }
  }
  // OpenAI's defaults, where they differ from the engine's.
  if (!sampling.has_temperature()) sampling.set_temperature(1.0f);
  if (max_tokens.has_value()) {
    generate.set_max_tokens(static_cast<int32_t>(*max_tokens));
  } else if (!chat) {
    generate.set_max_tokens(kDefaultCompletionMaxTokens);
  }
  return true;
}

}  // namespace waste::http
