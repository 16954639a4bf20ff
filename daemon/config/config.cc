#include "daemon/config/config.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/default_address.h"
#include "common/format.h"
#include "common/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"

// Header-only and exception-free: parse errors come back as values.
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#include <toml++/toml.h>

namespace waste {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Friendlier names accepted in the file for some proto fields.
absl::string_view FieldAlias(absl::string_view key) {
  if (key == "ram_budget") return "ram_budget_bytes";
  if (key == "keep_alive") return "keep_alive_seconds";
  if (key == "models_dir") return "models_dirs";
  return key;
}

std::string Where(const toml::node& node, absl::string_view source) {
  const auto& begin = node.source().begin;
  return absl::StrCat(source, ":", static_cast<int>(begin.line));
}

absl::StatusOr<int64_t> TomlInt(const toml::node& node, const FieldDescriptor* field,
                                absl::string_view path, absl::string_view source) {
  if (auto v = node.value<int64_t>()) return *v;
  if (field->name() == "ram_budget_bytes" || field->name() == "max_saved_sessions_bytes" ||
      field->name() == "http_max_body_bytes") {
    if (auto s = node.value<std::string>()) {
      auto bytes = ParseByteSize(*s);
      if (!bytes.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(Where(node, source), ": ", path, ": ", bytes.status().message()));
      }
      return *bytes;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(Where(node, source), ": ", path, " must be an integer"));
}

absl::Status SetEnum(const toml::node& node, const FieldDescriptor* field, Message* msg,
                     absl::string_view path, absl::string_view source) {
  auto text = node.value<std::string>();
  if (!text) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(node, source), ": ", path, " must be a string"));
  }
  // "lru" -> CACHE_POLICY_LRU: enum values are prefixed by the enum's name.
  std::string prefix;
  for (char c : field->enum_type()->name()) {
    if (absl::ascii_isupper(c) && !prefix.empty()) prefix += '_';
    prefix += absl::ascii_toupper(c);
  }
  std::string wanted = absl::StrCat(prefix, "_", absl::AsciiStrToUpper(*text));
  const auto* value = field->enum_type()->FindValueByName(wanted);
  if (value == nullptr || value->number() == 0) {
    std::string choices;
    for (int i = 1; i < field->enum_type()->value_count(); ++i) {
      std::string name = field->enum_type()->value(i)->name().substr(prefix.size() + 1);
      absl::StrAppend(&choices, choices.empty() ? "" : ", ", absl::AsciiStrToLower(name));
    }
    return absl::InvalidArgumentError(absl::StrCat(Where(node, source), ": ", path, " = \"", *text,
                                                   "\" is not one of: ", choices));
  }
  msg->GetReflection()->SetEnum(msg, field, value);
  return absl::OkStatus();
}

absl::Status FillMessage(const toml::table& table, Message* msg, absl::string_view path,
                         absl::string_view source);

absl::Status SetScalar(const toml::node& node, const FieldDescriptor* field, Message* msg,
                       absl::string_view path, absl::string_view source) {
  const Reflection* refl = msg->GetReflection();
  auto type_error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(node, source), ": ", path, " must be ", what));
  };
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING: {
      auto v = node.value<std::string>();
      if (!v) return type_error("a string");
      if (field->is_repeated()) {
        refl->AddString(msg, field, *v);
      } else {
        refl->SetString(msg, field, *v);
      }
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_INT32: {
      ASSIGN_OR_RETURN(int64_t v, TomlInt(node, field, path, source));
      if (v < INT32_MIN || v > INT32_MAX) return type_error("a 32-bit integer");
      refl->SetInt32(msg, field, static_cast<int32_t>(v));
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      ASSIGN_OR_RETURN(int64_t v, TomlInt(node, field, path, source));
      refl->SetInt64(msg, field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      auto v = node.value<bool>();
      if (!v) return type_error("true or false");
      refl->SetBool(msg, field, *v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_ENUM:
      return SetEnum(node, field, msg, path, source);
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      const toml::table* sub = node.as_table();
      if (sub == nullptr) return type_error("a table");
      return FillMessage(*sub, refl->MutableMessage(msg, field), path, source);
    }
    default:
      return type_error("of a supported type");
  }
}

absl::Status SetMapOfMessages(const toml::node& node, const FieldDescriptor* field, Message* msg,
                              absl::string_view path, absl::string_view source) {
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(node, source), ": ", path, " must be a table"));
  }
  const Reflection* refl = msg->GetReflection();
  for (const auto& [toml_name, value] : *table) {
    absl::string_view name(toml_name.str().data(), toml_name.str().size());
    Message* entry = refl->AddMessage(msg, field);
    const FieldDescriptor* key_field = entry->GetDescriptor()->FindFieldByName("key");
    const FieldDescriptor* value_field = entry->GetDescriptor()->FindFieldByName("value");
    entry->GetReflection()->SetString(entry, key_field, std::string(name));
    std::string sub_path = absl::StrCat(path, ".", name);
    RETURN_IF_ERROR(SetScalar(value, value_field, entry, sub_path, source));
  }
  return absl::OkStatus();
}

absl::Status FillMessage(const toml::table& table, Message* msg, absl::string_view path,
                         absl::string_view source) {
  for (const auto& [toml_key, node] : table) {
    absl::string_view key(toml_key.str().data(), toml_key.str().size());
    std::string full = path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
    const FieldDescriptor* field =
        msg->GetDescriptor()->FindFieldByName(std::string(FieldAlias(key)));
    if (field == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(node, source), ": unknown key '", full, "'"));
    }
    if (field->is_map()) {
      RETURN_IF_ERROR(SetMapOfMessages(node, field, msg, full, source));
    } else if (field->is_repeated()) {
      if (const toml::array* array = node.as_array()) {
        for (const toml::node& element : *array) {
          RETURN_IF_ERROR(SetScalar(element, field, msg, full, source));
        }
      } else {
        RETURN_IF_ERROR(SetScalar(node, field, msg, full, source));
      }
    } else {
      RETURN_IF_ERROR(SetScalar(node, field, msg, full, source));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::DaemonConfig> ParseDaemonConfig(absl::string_view toml_text,
                                                   absl::string_view source) {
  toml::parse_result parsed = toml::parse(std::string_view(toml_text.data(), toml_text.size()),
                                          std::string_view(source.data(), source.size()));
  if (!parsed) {
    const toml::parse_error& error = parsed.error();
    return absl::InvalidArgumentError(absl::StrCat(
        source, ":", static_cast<int>(error.source().begin.line), ":",
        static_cast<int>(error.source().begin.column), ": ", std::string(error.description())));
  }
  v1::DaemonConfig config;
  RETURN_IF_ERROR(FillMessage(parsed.table(), &config, "", source));
  return config;
}

absl::StatusOr<v1::DaemonConfig> LoadDaemonConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read config file ", path, ": ", strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  return ParseDaemonConfig(text.str(), path);
}

void ApplyDaemonDefaults(v1::DaemonConfig* config) {
  if (config->socket().empty()) config->set_socket(DefaultSocketPath());
  if (config->log_level().empty()) config->set_log_level("info");
  if (!config->has_max_concurrent_requests()) config->set_max_concurrent_requests(4);
  if (!config->has_max_queued_requests()) config->set_max_queued_requests(64);
  if (!config->has_max_saved_sessions_bytes()) {
    config->set_max_saved_sessions_bytes(int64_t{4} << 30);
  }
  if (config->state_dir().empty()) {
    const char* state_directory = getenv("STATE_DIRECTORY");  // systemd StateDirectory=
    const char* xdg_state = getenv("XDG_STATE_HOME");
    const char* home = getenv("HOME");
    if (state_directory != nullptr && state_directory[0] != '\0') {
      config->set_state_dir(state_directory);
    } else if (xdg_state != nullptr && xdg_state[0] != '\0') {
      config->set_state_dir(absl::StrCat(xdg_state, "/waste"));
    } else if (home != nullptr && home[0] != '\0') {
      config->set_state_dir(absl::StrCat(home, "/.local/state/waste"));
    } else {
      config->set_state_dir("/var/lib/waste");
    }
  }
}

v1::ModelConfig MergeModelConfig(const v1::ModelConfig& base, const v1::ModelConfig& overrides) {
  v1::ModelConfig merged = base;
  // Proto3 explicit-presence fields merge exactly as wanted: set fields win.
  merged.MergeFrom(overrides);
  return merged;
}

}  // namespace waste
