#include "daemon/http/sse.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace waste::http {

std::string SseEvent(absl::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 8);
  for (absl::string_view line : absl::StrSplit(payload, '\n')) {
    absl::StrAppend(&out, "data: ", line, "\n");
  }
  out += "\n";
  return out;
}

std::string HttpChunk(absl::string_view data) {
  if (data.empty()) return "";
  return absl::StrCat(absl::StrFormat("%x", data.size()), "\r\n", data, "\r\n");
}

void SseParser::Feed(absl::string_view bytes) {
  pending_.append(bytes.data(), bytes.size());
  size_t start = 0;
  while (start < pending_.size()) {
    const size_t end = pending_.find_first_of("\r\n", start);
    if (end == std::string::npos) break;
    // "\r\n" is one line end; a lone "\r" at the end of the bytes might be
    // followed by "\n" in the next Feed, so wait for it.
    if (pending_[end] == '\r' && end + 1 == pending_.size()) break;
    Line(absl::string_view(pending_).substr(start, end - start));
    start = end + 1;
    if (pending_[end] == '\r' && pending_[start] == '\n') ++start;
  }
  pending_.erase(0, start);
}

void SseParser::Line(absl::string_view line) {
  if (line.empty()) {  // Blank line: the event is complete.
    if (has_data_) events_.push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line[0] == ':') return;  // Comment.
  absl::string_view field = line, value;
  if (const size_t colon = line.find(':'); colon != absl::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (absl::StartsWith(value, " ")) value.remove_prefix(1);
  }
  if (field != "data") return;
  if (has_data_) data_ += '\n';
  data_.append(value.data(), value.size());
  has_data_ = true;
}

std::vector<std::string> SseParser::TakeEvents() {
  std::vector<std::string> out;
  out.swap(events_);
  return out;
}

}  // namespace waste::http
