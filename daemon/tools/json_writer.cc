#include "daemon/tools/json_writer.h"

#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace waste::tools {

void JsonWriter::Newline() {
  out_.push_back('\n');
  out_.append(2 * stack_.size(), ' ');
}

void JsonWriter::BeforeValue() {
  if (stack_.empty()) {
    WCHECK(out_.empty()) << "a JSON document holds one top-level value";
    return;
  }
  Level& level = stack_.back();
  if (level.object) {
    WCHECK(level.key_pending) << "a value inside a JSON object needs a Key first";
    level.key_pending = false;
    return;
  }
  if (!level.empty) out_.push_back(',');
  level.empty = false;
  Newline();
}

void JsonWriter::Key(std::string_view key) {
  WCHECK(!stack_.empty() && stack_.back().object && !stack_.back().key_pending)
      << "Key outside an object or twice in a row";
  Level& level = stack_.back();
  if (!level.empty) out_.push_back(',');
  level.empty = false;
  level.key_pending = true;
  Newline();
  AppendEscaped(key);
  out_.append(": ");
}

void JsonWriter::BeginObject() {
  BeforeValue();
  out_.push_back('{');
  stack_.push_back({.object = true});
}

void JsonWriter::BeginArray() {
  BeforeValue();
  out_.push_back('[');
  stack_.push_back({.object = false});
}

void JsonWriter::Close(bool object, char bracket) {
  WCHECK(!stack_.empty() && stack_.back().object == object && !stack_.back().key_pending)
      << "unbalanced JSON " << bracket;
  const bool empty = stack_.back().empty;
  stack_.pop_back();
  if (!empty) Newline();
  out_.push_back(bracket);
}

void JsonWriter::EndObject() { Close(true, '}'); }
void JsonWriter::EndArray() { Close(false, ']'); }

void JsonWriter::String(std::string_view value) {
  BeforeValue();
  AppendEscaped(value);
}

void JsonWriter::Int(int64_t value) {
  BeforeValue();
  absl::StrAppend(&out_, value);
}

void JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  absl::StrAppend(&out_, value);
}

void JsonWriter::Double(double value) {
  BeforeValue();
  if (!std::isfinite(value)) {
    out_.append("null");
    return;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", value);
  out_.append(buf);
}

void JsonWriter::Bool(bool value) {
  BeforeValue();
  out_.append(value ? "true" : "false");
}

void JsonWriter::Null() {
  BeforeValue();
  out_.append("null");
}

void JsonWriter::AppendEscaped(std::string_view s) {
  out_.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out_.append("\\\"");
        break;
      case '\\':
        out_.append("\\\\");
        break;
      case '\n':
        out_.append("\\n");
        break;
      case '\r':
        out_.append("\\r");
        break;
      case '\t':
        out_.append("\\t");
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out_.append(buf);
        } else {
          out_.push_back(static_cast<char>(c));  // UTF-8 passes through.
        }
    }
  }
  out_.push_back('"');
}

}  // namespace waste::tools
