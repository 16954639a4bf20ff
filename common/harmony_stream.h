// A gpt-oss reply (OpenAI's harmony format) taken apart as it streams: its
// messages are "<|channel|>NAME<|message|>TEXT<|end|>", each after the first
// opened by "<|start|>assistant" (a tool call adds " to=..." and a
// "<|constrain|>" type to the header). The analysis channel is the model's
// reasoning; final and commentary are what it says; a message to a function
// ("to=functions.NAME" in its header) is a call of that tool, its body the
// arguments, handed back whole when the message ends (the reply ends at its
// <|call|>). The splitter hands back
// each piece of text as soon as it is known not to be markup, so a reply
// streams as it is generated; the end tokens (<|return|>, <|call|>) are
// never part of the text.
//
// Not thread-safe: one per reply, fed in order.
#ifndef WASTE_COMMON_HARMONY_STREAM_H_
#define WASTE_COMMON_HARMONY_STREAM_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/tool_call.h"

namespace waste {

// The length of the longest suffix of `s` that begins `marker` (a marker
// cut between two pieces of a stream).
size_t PartialMarkerLength(std::string_view s, std::string_view marker);

class HarmonySplitter {
 public:
  struct Parts {
    std::string reasoning;
    std::string content;
    std::vector<ToolCall> calls;
  };

  // The next piece of the reply's text; returns what of it is now known.
  Parts Add(std::string_view text);
  // At the end of the reply: text held back as a possible marker.
  Parts Finish();

 private:
  void Emit(std::string_view text, Parts* out);

  // The message's body is over: a call's is handed back.
  void EndMessage(Parts* out);

  bool in_body_ = false;  // Between <|message|> and <|end|>.
  bool reasoning_ = false;
  std::string call_;       // The function the message is to, if any.
  std::string arguments_;  // A call's body so far.
  std::string pending_;    // Text not yet handed back.
};

}  // namespace waste

#endif  // WASTE_COMMON_HARMONY_STREAM_H_
