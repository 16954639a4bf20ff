// JSON written as Python's json.dumps writes it by default, which is what
// chat templates' `tojson` produces and so what models are trained to read
// and write: ", " between items and ": " after keys, keys in the order
// given, non-ASCII characters as they are.
#ifndef WASTE_COMMON_PYTHON_JSON_H_
#define WASTE_COMMON_PYTHON_JSON_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace waste {

// indent >= 0: as json.dumps(..., indent=indent) (tojson(indent=N)) lays
// it out, one item per line.
std::string PythonJson(const nlohmann::ordered_json& json, int indent = -1);
// JSON text re-written so (invalid JSON gives "null").
std::string PythonJsonFromText(std::string_view json_text);

}  // namespace waste

#endif  // WASTE_COMMON_PYTHON_JSON_H_
