#include "common/python_json.h"

namespace waste {
namespace {

using Json = nlohmann::ordered_json;

// Invalid UTF-8 is replaced rather than thrown on.
std::string Scalar(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

void Write(const Json& json, std::string* out) {
  if (json.is_object()) {
    out->push_back('{');
    bool first = true;
    for (const auto& [key, value] : json.items()) {
      if (!first) out->append(", ");
      out->append(Scalar(Json(key))).append(": ");
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
    out->append(Scalar(json));
  }
}

}  // namespace

std::string PythonJson(const nlohmann::ordered_json& json) {
  std::string out;
  Write(json, &out);
  return out;
}

std::string PythonJsonFromText(std::string_view json_text) {
  Json json = Json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) json = nullptr;
  return PythonJson(json);
}

}  // namespace waste
