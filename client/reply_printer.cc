#include "client/reply_printer.h"

namespace waste {
namespace {

constexpr char kDim[] = "\x1b[2m";
constexpr char kNormal[] = "\x1b[0m";

}  // namespace

void ReplyPrinter::Add(const std::string& text) {
  Show(splitter_.Add(text));
  out_ << std::flush;
}

void ReplyPrinter::Finish() {
  Show(splitter_.Finish());
  if (in_reasoning_ && terminal_) out_ << kNormal;
  in_reasoning_ = false;
  out_ << std::flush;
}

void ReplyPrinter::Show(const ReasoningSplitter::Parts& parts) {
  if (!parts.reasoning.empty()) {
    if (!in_reasoning_ && terminal_) out_ << kDim;
    in_reasoning_ = true;
    out_ << parts.reasoning;
  }
  if (!parts.content.empty()) {
    if (in_reasoning_) out_ << (terminal_ ? kNormal : "") << "\n\n";
    in_reasoning_ = false;
    answer_ += parts.content;
    out_ << parts.content;
  }
}

}  // namespace waste
