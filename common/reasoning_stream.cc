#include "common/reasoning_stream.h"

namespace waste {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";
constexpr std::string_view kChannel = "<|channel|>";

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

size_t LeadingSpace(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && IsSpace(s[n])) ++n;
  return n;
}

// `s` without its trailing whitespace: its length.
size_t WithoutTrailingSpace(std::string_view s) {
  size_t n = s.size();
  while (n > 0 && IsSpace(s[n - 1])) --n;
  return n;
}

// Whether `s` may still grow into `marker`.
bool MayBecome(std::string_view s, std::string_view marker) {
  return s.size() < marker.size() && marker.substr(0, s.size()) == s;
}

}  // namespace

ReasoningSplitter::Parts ReasoningSplitter::Add(std::string_view text) {
  Parts out;
  switch (form_) {
    case Form::kPlain:
      out.content = text;
      return out;
    case Form::kHarmony:
      return harmony_.Add(text);
    case Form::kUndecided:
    case Form::kThink:
      break;
  }
  pending_.append(text);
  if (form_ == Form::kUndecided) Decide(&out);
  if (form_ == Form::kThink) ThinkAdd(&out);
  return out;
}

void ReasoningSplitter::Decide(Parts* out) {
  const std::string_view p = pending_;
  if (p.substr(0, kChannel.size()) == kChannel) {
    form_ = Form::kHarmony;
    *out = harmony_.Add(p);
    pending_.clear();
    return;
  }
  const size_t space = LeadingSpace(p);
  const std::string_view rest = p.substr(space);
  if (rest.substr(0, kOpen.size()) == kOpen) {
    form_ = Form::kThink;
    pending_.erase(0, space + kOpen.size());
    return;
  }
  if (MayBecome(rest, kOpen) || (space == 0 && MayBecome(p, kChannel))) return;
  form_ = Form::kPlain;
  out->content = std::move(pending_);
  pending_.clear();
}

void ReasoningSplitter::ThinkAdd(Parts* out) {
  if (think_ == Think::kReasoning) {
    if (!started_) pending_.erase(0, LeadingSpace(pending_));
    const size_t close = pending_.find(kClose);
    // Up to </think>, or all but what may begin it; whitespace that may
    // turn out to be the block's last is held back too.
    const size_t upto = close != std::string::npos
                            ? close
                            : pending_.size() - PartialMarkerLength(pending_, kClose);
    const size_t n = WithoutTrailingSpace(std::string_view(pending_).substr(0, upto));
    out->reasoning.append(pending_, 0, n);
    started_ = started_ || n > 0;
    if (close == std::string::npos) {
      pending_.erase(0, n);
      return;
    }
    pending_.erase(0, close + kClose.size());
    think_ = Think::kAnswer;
    started_ = false;
  }
  if (!started_) {
    pending_.erase(0, LeadingSpace(pending_));
    if (pending_.empty()) return;
    started_ = true;
  }
  out->content += pending_;
  pending_.clear();
}

ReasoningSplitter::Parts ReasoningSplitter::Finish() {
  Parts out;
  switch (form_) {
    case Form::kHarmony:
      return harmony_.Finish();
    case Form::kUndecided:
      // Whitespace, or the start of a marker that never came: as it was.
      out.content = std::move(pending_);
      break;
    case Form::kThink:
      // Cut short inside the block: what it held is reasoning.
      if (think_ == Think::kReasoning) {
        out.reasoning = pending_.substr(0, WithoutTrailingSpace(pending_));
      }
      break;
    case Form::kPlain:
      break;
  }
  pending_.clear();
  return out;
}

}  // namespace waste
