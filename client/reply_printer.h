// Prints a chat reply as it streams. A reply with reasoning (gpt-oss's
// harmony, or a <think> block: Qwen3, DeepSeek-R1, GLM-4.5) is shown
// without its markup: the model's reasoning first, dimmed on a terminal,
// then a blank line and the answer; answer() is what a conversation keeps
// of it (these models' templates drop the reasoning from the history). Any
// other reply is printed as it comes.
#ifndef WASTE_CLIENT_REPLY_PRINTER_H_
#define WASTE_CLIENT_REPLY_PRINTER_H_

#include <ostream>
#include <string>

#include "common/reasoning_stream.h"

namespace waste {

class ReplyPrinter {
 public:
  ReplyPrinter(std::ostream& out, bool terminal) : out_(out), terminal_(terminal) {}

  // At the reply's started event: `reasoning_open` (the prompt left a
  // <think> block open) makes its first text reasoning.
  void Start(bool reasoning_open) { splitter_ = ReasoningSplitter(reasoning_open); }
  void Add(const std::string& text);
  // At the end of the reply (before its closing newline).
  void Finish();
  // The reply as the conversation goes on with it.
  const std::string& answer() const { return answer_; }

 private:
  void Show(const ReasoningSplitter::Parts& parts);

  std::ostream& out_;
  bool terminal_;
  ReasoningSplitter splitter_;
  bool in_reasoning_ = false;  // Reasoning shown, the answer not yet.
  std::string answer_;
};

}  // namespace waste

#endif  // WASTE_CLIENT_REPLY_PRINTER_H_
