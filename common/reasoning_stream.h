// A chat reply taken apart into the model's reasoning and its answer as it
// streams, in whichever form the model writes them:
//   - harmony (gpt-oss: the reply opens with <|channel|>): HarmonySplitter;
//   - a <think>...</think> block at the start of the reply (Qwen3,
//     DeepSeek-R1, GLM-4.5, QwQ): the text inside is the reasoning, the
//     text after it the answer; the whitespace just inside the tags and
//     between the block and the answer is dropped, as these models' chat
//     templates drop it when they render a reply back;
//   - anything else: all of it is the answer, untouched;
//   - a reply to a prompt that left a <think> block open (DeepSeek-V3.1
//     asked to think): reasoning up to </think>, then the answer.
// The form is decided at the reply's first characters: text is held back
// only while it may still become "<think>" or "<|channel|>" (after leading
// whitespace, for <think>). Reasoning and answer are handed back as soon
// as they are known not to be markup or whitespace to drop.
//
// Not thread-safe: one per reply, fed in order.
#ifndef WASTE_COMMON_REASONING_STREAM_H_
#define WASTE_COMMON_REASONING_STREAM_H_

#include <string>
#include <string_view>

#include "common/harmony_stream.h"

namespace waste {

class ReasoningSplitter {
 public:
  using Parts = HarmonySplitter::Parts;

  // `opened`: the prompt left a <think> block open (DeepSeek-V3.1 asked to
  // think), so the reply starts inside it and only closes it.
  explicit ReasoningSplitter(bool opened = false)
      : form_(opened ? Form::kThink : Form::kUndecided) {}

  // The next piece of the reply's text; returns what of it is now known.
  Parts Add(std::string_view text);
  // At the end of the reply: what was held back.
  Parts Finish();
  // Whether the reply has a reasoning form (harmony or <think>): then its
  // answer is the content handed back, not its text.
  bool split() const { return form_ == Form::kHarmony || form_ == Form::kThink; }

 private:
  enum class Form { kUndecided, kPlain, kHarmony, kThink };
  // Where a <think> reply is: inside the block, or after it.
  enum class Think { kReasoning, kAnswer };

  void Decide(Parts* out);
  void ThinkAdd(Parts* out);

  Form form_;
  HarmonySplitter harmony_;
  Think think_ = Think::kReasoning;
  bool started_ = false;  // Something (not whitespace) of this part was handed back.
  std::string pending_;   // Text not yet handed back.
};

}  // namespace waste

#endif  // WASTE_COMMON_REASONING_STREAM_H_
