#include "daemon/tools/inspect.h"

#include <charconv>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/cli_args.h"
#include "common/format.h"
#include "common/status_macros.h"
#include "daemon/model/layout.h"
#include "storage/gguf.h"

namespace waste::tools {
namespace {

using model::LayerLayout;
using model::ModelLayout;
using model::TensorPart;
using storage::GgufFile;
using storage::GgufValue;
using storage::GgufValueType;
// Keys in insertion order, so the output reads in the order written here.
using Json = nlohmann::ordered_json;

constexpr char kUsage[] = R"(usage: wasted inspect MODEL.gguf [--json]

Describes a GGUF model: format, architecture and hyperparameters, tokenizer,
bytes by tensor type, by part and by layer, expert sizes, parameter count.
)";

// What inspect reports about the tokenizer.
struct TokenizerInfo {
  std::string model;  // tokenizer.ggml.model, "" if absent.
  std::string pre;
  int64_t tokens = 0;
  int64_t merges = 0;
  std::optional<uint64_t> bos, eos;
};

TokenizerInfo ReadTokenizer(const GgufFile& gguf) {
  TokenizerInfo info;
  if (auto model = gguf.GetString("tokenizer.ggml.model"); model.ok()) info.model = *model;
  if (auto pre = gguf.GetString("tokenizer.ggml.pre"); pre.ok()) info.pre = *pre;
  if (const GgufValue* v = gguf.Find("tokenizer.ggml.tokens");
      v && v->type == GgufValueType::kArray) {
    info.tokens = static_cast<int64_t>(v->array.size());
  }
  if (const GgufValue* v = gguf.Find("tokenizer.ggml.merges");
      v && v->type == GgufValueType::kArray) {
    info.merges = static_cast<int64_t>(v->array.size());
  }
  if (auto id = gguf.GetUint("tokenizer.ggml.bos_token_id"); id.ok()) info.bos = *id;
  if (auto id = gguf.GetUint("tokenizer.ggml.eos_token_id"); id.ok()) info.eos = *id;
  return info;
}

// A scalar metadata value as text; arrays as "[N x type]".
std::string ValueText(const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::kUint8:
    case GgufValueType::kUint16:
    case GgufValueType::kUint32:
    case GgufValueType::kUint64:
      return absl::StrCat(v.u);
    case GgufValueType::kInt8:
    case GgufValueType::kInt16:
    case GgufValueType::kInt32:
    case GgufValueType::kInt64:
      return absl::StrCat(v.i);
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64:
      return absl::StrFormat("%g", v.f);
    case GgufValueType::kBool:
      return v.u ? "true" : "false";
    case GgufValueType::kString:
      return v.str;
    case GgufValueType::kArray:
      return absl::StrCat("[", v.array.size(), " x ", GgufValueTypeName(v.array_type), "]");
  }
  return "?";
}

Json JsonValue(const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::kUint8:
    case GgufValueType::kUint16:
    case GgufValueType::kUint32:
    case GgufValueType::kUint64:
      return v.u;
    case GgufValueType::kInt8:
    case GgufValueType::kInt16:
    case GgufValueType::kInt32:
    case GgufValueType::kInt64:
      return v.i;
    case GgufValueType::kFloat32: {
      // The shortest decimal that reads back as the same float: 1e-05, not
      // the 9.999999747378752e-06 its widening to double would print.
      char buf[32];
      const char* end = std::to_chars(buf, buf + sizeof(buf), static_cast<float>(v.f)).ptr;
      double d = v.f;
      std::from_chars(buf, end, d);
      return d;  // Non-finite values are written as null.
    }
    case GgufValueType::kFloat64:
      return v.f;
    case GgufValueType::kBool:
      return v.u != 0;
    case GgufValueType::kString:
      return v.str;
    case GgufValueType::kArray:
      // Per-layer arrays (head counts of hybrid models) are short; anything
      // else is summarized by its length.
      if (v.array_type != GgufValueType::kString && v.array.size() <= 1024) {
        Json array = Json::array();
        for (const GgufValue& e : v.array) array.push_back(JsonValue(e));
        return array;
      }
      return ValueText(v);
  }
  return nullptr;
}

// The {arch}.* keys, prefix dropped.
std::vector<std::pair<std::string, const GgufValue*>> HParams(const GgufFile& gguf,
                                                              const std::string& arch) {
  std::vector<std::pair<std::string, const GgufValue*>> out;
  if (arch.empty()) return out;
  const std::string prefix = arch + ".";
  for (const auto& [key, value] : gguf.metadata()) {
    if (key.rfind(prefix, 0) == 0) out.emplace_back(key.substr(prefix.size()), &value);
  }
  return out;
}

// "292.35K", "6.74B" parameters.
std::string FormatCount(int64_t n) {
  if (n < 1000) return absl::StrCat(n);
  const char* units[] = {"K", "M", "B", "T"};
  double v = static_cast<double>(n);
  int unit = -1;
  while (v >= 1000 && unit < 3) {
    v /= 1000;
    ++unit;
  }
  return absl::StrFormat("%.2f%s", v, units[unit]);
}

std::string Percent(uint64_t part, uint64_t total) {
  return total == 0 ? "-" : absl::StrFormat("%.1f%%", 100.0 * part / total);
}

// Parts any layer has bytes in, in report order.
std::vector<TensorPart> LayerParts(const ModelLayout& layout) {
  std::vector<TensorPart> parts;
  for (int p = 0; p < model::kNumTensorParts; ++p) {
    const auto part = static_cast<TensorPart>(p);
    for (const LayerLayout& layer : layout.layers()) {
      if (layer.parts[part] > 0) {
        parts.push_back(part);
        break;
      }
    }
  }
  return parts;
}

// Runs of consecutive layers with identical sizes, as [first, last] pairs,
// so that a 61-layer model with 3 dense layers prints as two rows.
std::vector<std::pair<int, int>> LayerRuns(const ModelLayout& layout) {
  std::vector<std::pair<int, int>> runs;
  const auto& layers = layout.layers();
  for (size_t i = 0; i < layers.size(); ++i) {
    if (!runs.empty() && layers[runs.back().second].parts.bytes == layers[i].parts.bytes &&
        layers[runs.back().second].n_expert == layers[i].n_expert) {
      runs.back().second = static_cast<int>(i);
    } else {
      runs.emplace_back(static_cast<int>(i), static_cast<int>(i));
    }
  }
  return runs;
}

// deepseek2's MLA form: "split" (attn_k_b/attn_v_b, current converters),
// "fused" (one attn_kv_b, converted before llama.cpp's split), "" otherwise.
std::string MlaForm(const GgufFile& gguf, const ModelLayout& layout) {
  if (layout.arch() != "deepseek2") return "";
  if (gguf.FindTensor("blk.0.attn_kv_b.weight") != nullptr) return "fused";
  return gguf.FindTensor("blk.0.attn_k_b.weight") != nullptr ? "split" : "";
}

std::string TextReport(const GgufFile& gguf, const ModelLayout& layout) {
  std::string out;
  auto line = [&out](std::string_view label, const std::string& text) {
    absl::StrAppend(&out, absl::StrFormat("%-14s%s\n", std::string(label), text));
  };
  line("file", absl::StrCat(gguf.path(), " (", FormatBytes(gguf.disk_bytes()),
                            gguf.split_count() > 1
                                ? absl::StrCat(" in ", gguf.split_count(), " parts, gguf-split")
                                : "",
                            ")"));
  line("gguf",
       absl::StrCat("version ", gguf.version(), ", alignment ", gguf.alignment(), ", ",
                    layout.tensor_count(), " tensors, ", gguf.metadata().size(), " metadata keys"));
  line("architecture", layout.arch().empty() ? "(general.architecture missing)" : layout.arch());
  if (auto name = gguf.GetString("general.name"); name.ok()) line("name", *name);
  const std::string mla = MlaForm(gguf, layout);
  if (mla == "fused") {
    line("attention",
         "MLA with one attn_kv_b per layer (converted before llama.cpp's split): "
         "each layer's W_k_b is derived once at run time (Q8_0 for 2-6-bit files)");
  } else if (mla == "split") {
    line("attention", "MLA with attn_k_b / attn_v_b");
  }
  const auto hparams = HParams(gguf, layout.arch());
  if (!hparams.empty()) {
    out += "hyperparameters\n";
    for (const auto& [key, value] : hparams) {
      absl::StrAppend(&out, absl::StrFormat("  %-40s %s\n", key, ValueText(*value)));
    }
  }
  const TokenizerInfo tok = ReadTokenizer(gguf);
  if (tok.model.empty() && tok.tokens == 0) {
    line("tokenizer", "none");
  } else {
    std::string text = absl::StrCat(tok.model.empty() ? "?" : tok.model,
                                    tok.pre.empty() ? "" : absl::StrCat(" (pre ", tok.pre, ")"),
                                    ", vocab ", tok.tokens);
    if (tok.merges > 0) absl::StrAppend(&text, ", ", tok.merges, " merges");
    if (tok.bos) absl::StrAppend(&text, ", bos ", *tok.bos);
    if (tok.eos) absl::StrAppend(&text, ", eos ", *tok.eos);
    line("tokenizer", text);
  }
  line("parameters",
       absl::StrCat(FormatCount(layout.total_params()), " (", layout.total_params(), ")"));
  line("tensor bytes",
       absl::StrCat(FormatBytes(layout.total_bytes()), " (", layout.total_bytes(), ")"));

  out += "bytes by type\n";
  for (const auto& [type, bytes] : layout.types()) {
    absl::StrAppend(&out, absl::StrFormat("  %-10s %5d tensors %12s %7s\n",
                                          std::string(storage::GgmlTypeName(type)), bytes.tensors,
                                          FormatBytes(bytes.bytes),
                                          Percent(bytes.bytes, layout.total_bytes())));
  }
  out += "bytes by part\n";
  for (int p = 0; p < model::kNumTensorParts; ++p) {
    const auto part = static_cast<TensorPart>(p);
    if (layout.parts()[part] == 0) continue;
    absl::StrAppend(&out, absl::StrFormat("  %-16s %12s %7s\n", TensorPartName(part),
                                          FormatBytes(layout.parts()[part]),
                                          Percent(layout.parts()[part], layout.total_bytes())));
  }

  absl::StrAppend(&out, "layers        ", layout.layers().size(), "\n");
  const std::vector<TensorPart> parts = LayerParts(layout);
  if (!layout.layers().empty()) {
    absl::StrAppend(&out, absl::StrFormat("  %-9s %11s", "layer", "total"));
    for (TensorPart part : parts) {
      absl::StrAppend(&out, absl::StrFormat(" %15s", TensorPartName(part)));
    }
    out += "\n";
    for (auto [first, last] : LayerRuns(layout)) {
      const LayerLayout& layer = layout.layers()[first];
      const std::string range =
          first == last ? absl::StrCat(first) : absl::StrCat(first, "-", last);
      absl::StrAppend(&out, absl::StrFormat("  %-9s %11s", range, FormatBytes(layer.bytes)));
      for (TensorPart part : parts) {
        absl::StrAppend(&out, absl::StrFormat(" %15s", FormatBytes(layer.parts[part])));
      }
      out += "\n";
    }
  }
  if (layout.moe_layer_count() > 0) {
    line("experts", absl::StrCat(layout.expert_count(), " routed (", layout.experts_used(),
                                 " used per token), ", layout.shared_expert_count(), " shared, in ",
                                 layout.moe_layer_count(), " layers"));
    // Mixes give some layers' experts other types: say the range.
    const std::string size = layout.min_expert_bytes() == layout.expert_bytes()
                                 ? FormatBytes(layout.expert_bytes())
                                 : absl::StrCat(FormatBytes(layout.min_expert_bytes()), " to ",
                                                FormatBytes(layout.expert_bytes()));
    line("expert size", absl::StrCat(size, " per expert per layer (gate + up + down)"));
  }
  line("active/token",
       absl::StrCat(FormatBytes(layout.ActiveBytesPerToken()), " of weights read per token"));
  return out;
}

std::string JsonReport(const GgufFile& gguf, const ModelLayout& layout) {
  Json json;
  json["file"] = gguf.path();
  json["file_bytes"] = gguf.disk_bytes();
  json["split_parts"] = gguf.split_count();
  json["gguf_version"] = gguf.version();
  json["alignment"] = gguf.alignment();
  json["metadata_keys"] = gguf.metadata().size();
  json["tensor_count"] = layout.tensor_count();
  json["architecture"] = layout.arch();
  if (const std::string mla = MlaForm(gguf, layout); !mla.empty()) json["mla_form"] = mla;
  Json& hparams = json["hparams"] = Json::object();
  for (const auto& [key, value] : HParams(gguf, layout.arch())) hparams[key] = JsonValue(*value);
  const TokenizerInfo tok = ReadTokenizer(gguf);
  Json& tokenizer = json["tokenizer"];
  tokenizer["model"] = tok.model;
  tokenizer["pre"] = tok.pre;
  tokenizer["vocab_size"] = tok.tokens;
  tokenizer["merges"] = tok.merges;
  if (tok.bos) tokenizer["bos_token_id"] = *tok.bos;
  if (tok.eos) tokenizer["eos_token_id"] = *tok.eos;
  json["parameters"] = layout.total_params();
  json["tensor_bytes"] = layout.total_bytes();
  Json& by_type = json["bytes_by_type"] = Json::object();
  for (const auto& [type, bytes] : layout.types()) {
    by_type[std::string(storage::GgmlTypeName(type))] = {
        {"tensors", bytes.tensors}, {"bytes", bytes.bytes}, {"parameters", bytes.params}};
  }
  auto parts_object = [](const model::PartBytes& parts) {
    Json out = Json::object();
    for (int p = 0; p < model::kNumTensorParts; ++p) {
      out[TensorPartName(static_cast<TensorPart>(p))] = parts.bytes[p];
    }
    return out;
  };
  json["bytes_by_part"] = parts_object(layout.parts());
  Json& layers = json["layers"] = Json::array();
  for (const LayerLayout& layer : layout.layers()) {
    layers.push_back({{"index", layer.index},
                      {"bytes", layer.bytes},
                      {"experts", layer.n_expert},
                      {"expert_bytes", layer.expert_bytes},
                      {"parts", parts_object(layer.parts)}});
  }
  json["expert_count"] = layout.expert_count();
  json["experts_used"] = layout.experts_used();
  json["shared_expert_count"] = layout.shared_expert_count();
  json["moe_layers"] = layout.moe_layer_count();
  json["expert_bytes"] = layout.expert_bytes();
  json["min_expert_bytes"] = layout.min_expert_bytes();
  json["active_bytes_per_token"] = layout.ActiveBytesPerToken();
  // GGUF strings are not checked for UTF-8: replace bad bytes rather than
  // throw.
  return json.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace

absl::StatusOr<std::string> InspectModel(storage::Env* env, const std::string& path, bool json) {
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open(env, path));
  ASSIGN_OR_RETURN(ModelLayout layout, ModelLayout::FromGguf(*gguf));
  return json ? JsonReport(*gguf, layout) : TextReport(*gguf, layout);
}

int RunInspect(const std::vector<std::string>& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, {{"json", false}, {"help", false}});
  if (!parsed.ok()) {
    std::cerr << "wasted inspect: " << parsed.status().message() << "\n" << kUsage;
    return 2;
  }
  if (parsed->Has("help")) {
    std::cout << kUsage;
    return 0;
  }
  if (parsed->positional().size() != 1) {
    std::cerr << "wasted inspect: give exactly one MODEL.gguf\n" << kUsage;
    return 2;
  }
  absl::StatusOr<std::string> report =
      InspectModel(storage::Env::Default(), parsed->positional()[0], parsed->Has("json"));
  if (!report.ok()) {
    std::cerr << "wasted inspect: " << report.status().message() << "\n";
    return 1;
  }
  std::cout << *report;
  return 0;
}

}  // namespace waste::tools
