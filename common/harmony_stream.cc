#include "common/harmony_stream.h"

#include <algorithm>

namespace waste {
namespace {

constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kEnd = "<|end|>";

}  // namespace

size_t PartialMarkerLength(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

void HarmonySplitter::Emit(std::string_view text, Parts* out) {
  if (!call_.empty()) {
    arguments_.append(text);
  } else {
    (reasoning_ ? out->reasoning : out->content).append(text);
  }
}

HarmonySplitter::Parts HarmonySplitter::Add(std::string_view text) {
  Parts out;
  pending_.append(text);
  while (true) {
    if (!in_body_) {
      // A header: "[<|start|>assistant]<|channel|>NAME[ to=...][<|constrain|>T]<|message|>".
      const size_t message = pending_.find(kMessage);
      if (message == std::string::npos) break;
      const std::string_view header = std::string_view(pending_).substr(0, message);
      const size_t channel = header.find(kChannel);
      std::string_view name =
          channel == std::string_view::npos ? "" : header.substr(channel + kChannel.size());
      name = name.substr(0, name.find_first_of(" <"));
      reasoning_ = name == "analysis";
      // "to=functions.NAME" before or after the channel: a tool call.
      call_.clear();
      if (const size_t to = header.find("to=functions."); to != std::string_view::npos) {
        std::string_view recipient = header.substr(to + 13);
        call_ = recipient.substr(0, recipient.find_first_of(" <"));
      }
      in_body_ = true;
      pending_.erase(0, message + kMessage.size());
      continue;
    }
    const size_t end = pending_.find(kEnd);
    if (end == std::string::npos) {
      // Hand back all but what may be the start of <|end|>.
      const size_t keep = PartialMarkerLength(pending_, kEnd);
      Emit(std::string_view(pending_).substr(0, pending_.size() - keep), &out);
      pending_.erase(0, pending_.size() - keep);
      break;
    }
    Emit(std::string_view(pending_).substr(0, end), &out);
    pending_.erase(0, end + kEnd.size());
    EndMessage(&out);
  }
  return out;
}

void HarmonySplitter::EndMessage(Parts* out) {
  in_body_ = false;
  if (call_.empty()) return;
  const size_t begin = arguments_.find_first_not_of(" \t\r\n");
  out->calls.push_back(
      {.name = call_,
       .arguments =
           begin == std::string::npos
               ? "{}"
               : arguments_.substr(begin, arguments_.find_last_not_of(" \t\r\n") - begin + 1)});
  call_.clear();
  arguments_.clear();
}

HarmonySplitter::Parts HarmonySplitter::Finish() {
  Parts out;
  // A reply cut short (max_tokens) inside a message: its held text is the
  // message's; a header never finished says nothing.
  if (in_body_) {
    Emit(pending_, &out);
    EndMessage(&out);
  }
  pending_.clear();
  return out;
}

}  // namespace waste
