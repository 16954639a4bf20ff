#include "common/python_json.h"

namespace waste {
namespace {

using Json = nlohmann::ordered_json;

// Invalid UTF-8 is replaced rather than thrown on.
std::string Scalar(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// indent < 0: on one line; else json.dumps(indent=N)'s layout: each item
// on its own line, N spaces deeper per level, "," ending a line.
void Write(const Json& json, int indent, int depth, std::string* out) {
  const bool object = json.is_object();
  if ((!object && !json.is_array()) || json.empty()) {
    out->append(object ? "{}" : json.is_array() ? "[]" : Scalar(json));
    return;
  }
  auto next_line = [&](int level) {
    out->push_back('\n');
    out->append(static_cast<size_t>(indent * level), ' ');
  };
  out->push_back(object ? '{' : '[');
  bool first = true;
  for (const auto& [key, value] : json.items()) {
    if (!first) out->append(indent < 0 ? ", " : ",");
    if (indent >= 0) next_line(depth + 1);
    if (object) out->append(Scalar(Json(key))).append(": ");
    Write(value, indent, depth + 1, out);
    first = false;
  }
  if (indent >= 0) next_line(depth);
  out->push_back(object ? '}' : ']');
}

}  // namespace

std::string PythonJson(const nlohmann::ordered_json& json, int indent) {
  std::string out;
  Write(json, indent, 0, &out);
  return out;
}

std::string PythonJsonFromText(std::string_view json_text) {
  Json json = Json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) json = nullptr;
  return PythonJson(json);
}

}  // namespace waste
