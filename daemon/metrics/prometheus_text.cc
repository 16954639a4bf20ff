#include "daemon/metrics/prometheus_text.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace waste::metrics {
namespace {

// HELP text escapes only backslash and newline.
std::string EscapeHelp(absl::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void AppendLabels(const Labels& labels, std::string* out) {
  if (labels.empty()) return;
  *out += '{';
  bool first = true;
  for (const auto& [name, value] : labels) {
    if (!first) *out += ',';
    first = false;
    absl::StrAppend(out, name, "=\"", EscapeLabelValue(value), "\"");
  }
  *out += '}';
}

}  // namespace

std::string EscapeLabelValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Counters are integers; print them without an exponent up to 2^53,
  // where doubles stop being exact.
  if (value == std::floor(value) && std::fabs(value) < 9007199254740992.0) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  // The shortest form that reads back as the same double (0.1, not
  // 0.10000000000000001).
  std::string text = absl::StrFormat("%.15g", value);
  if (std::strtod(text.c_str(), nullptr) != value) text = absl::StrFormat("%.17g", value);
  return text;
}

void PrometheusText::Family(absl::string_view name, absl::string_view type,
                            absl::string_view help) {
  absl::StrAppend(&out_, "# HELP ", name, " ", EscapeHelp(help), "\n# TYPE ", name, " ", type,
                  "\n");
}

void PrometheusText::Sample(absl::string_view name, const Labels& labels, double value) {
  out_.append(name.data(), name.size());
  AppendLabels(labels, &out_);
  absl::StrAppend(&out_, " ", FormatSampleValue(value), "\n");
}

void PrometheusText::HistogramSamples(absl::string_view name, const Labels& labels,
                                      const Histogram& histogram) {
  const std::string bucket = absl::StrCat(name, "_bucket");
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= histogram.bounds.size(); ++i) {
    cumulative += histogram.counts[i];
    Labels with_le = labels;
    with_le.emplace_back("le", i < histogram.bounds.size() ? FormatSampleValue(histogram.bounds[i])
                                                           : std::string("+Inf"));
    Sample(bucket, with_le, static_cast<double>(cumulative));
  }
  Sample(absl::StrCat(name, "_sum"), labels, histogram.sum);
  Sample(absl::StrCat(name, "_count"), labels, static_cast<double>(histogram.count));
}

}  // namespace waste::metrics
