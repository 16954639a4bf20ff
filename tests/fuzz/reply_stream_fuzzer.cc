// libFuzzer target for reading a chat reply as it streams
// (common/reasoning_stream, common/harmony_stream, common/tool_call_stream):
// tests/fuzz/run_fuzzer.sh reply_stream builds and runs it with clang;
// //tests/fuzz:reply_stream_fuzzer_test replays the committed seeds.
//
// Input: a flag byte (bits 0-2: the tool format, bit 3: the prompt left a
// <think> block open, bits 4-7: the size of the pieces the reply is fed
// in), then the reply's text. Checked:
//   - the reasoning, content and calls are the same whether the reply comes
//     whole, a byte at a time or in pieces of the chosen size (what a
//     client sees does not depend on how tokens cut the text);
//   - every call has a name, and arguments that are a JSON object (those of
//     a harmony reply, which any format's reply may be, excepted: the HTTP
//     face checks them).
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/logging.h"
#include "common/reasoning_stream.h"
#include "common/tool_call_stream.h"

namespace waste {
namespace {

// Tools whose "units" and "city" are strings (GLM reads schemas).
constexpr char kTools[] = R"([{"type": "function", "function": {"name": "get_weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"},
  "units": {"type": "string"}, "days": {"type": "integer"}}}}}])";

struct Reply {
  std::string reasoning, content;
  std::vector<ToolCall> calls;          // The tool call splitter's.
  std::vector<ToolCall> harmony_calls;  // A harmony reply's (whatever the format).
};

// The reply fed in pieces of `step` bytes through the reasoning splitter,
// then its content through the tool call splitter, as the HTTP face does.
Reply Read(ToolFormat format, bool opened, std::string_view text, size_t step) {
  ReasoningSplitter reasoning(opened);
  ToolCallSplitter tools(format, kTools);
  Reply out;
  auto take = [&](ReasoningSplitter::Parts parts, bool last) {
    out.reasoning += parts.reasoning;
    for (ToolCall& call : parts.calls) out.harmony_calls.push_back(std::move(call));
    ToolCallSplitter::Parts split = tools.Add(parts.content);
    if (last) {
      ToolCallSplitter::Parts rest = tools.Finish();
      split.content += rest.content;
      for (ToolCall& call : rest.calls) split.calls.push_back(std::move(call));
    }
    out.content += split.content;
    for (ToolCall& call : split.calls) out.calls.push_back(std::move(call));
  };
  for (size_t i = 0; i < text.size(); i += step) take(reasoning.Add(text.substr(i, step)), false);
  take(reasoning.Finish(), true);
  return out;
}

void CheckSame(const std::vector<ToolCall>& a, const std::vector<ToolCall>& b, size_t step) {
  WCHECK(a.size() == b.size()) << "calls differ at pieces of " << step;
  for (size_t i = 0; i < a.size(); ++i) {
    WCHECK(a[i].id == b[i].id && a[i].name == b[i].name && a[i].arguments == b[i].arguments)
        << "call " << i << " differs at pieces of " << step;
  }
}

void CheckSame(const Reply& a, const Reply& b, size_t step) {
  WCHECK(a.reasoning == b.reasoning) << "reasoning differs at pieces of " << step;
  WCHECK(a.content == b.content) << "content differs at pieces of " << step;
  CheckSame(a.calls, b.calls, step);
  CheckSame(a.harmony_calls, b.harmony_calls, step);
}

}  // namespace
}  // namespace waste

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using waste::ToolFormat;
  if (size == 0) return 0;
  const int formats = static_cast<int>(ToolFormat::kLast) + 1;
  const auto format = static_cast<ToolFormat>((data[0] & 7) % formats);
  const bool opened = (data[0] & 8) != 0;
  const size_t step = 2 + (data[0] >> 4);
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const waste::Reply whole = waste::Read(format, opened, text, text.size() + 1);
  waste::CheckSame(whole, waste::Read(format, opened, text, 1), 1);
  waste::CheckSame(whole, waste::Read(format, opened, text, step), step);
  // (A harmony call's arguments are the message as the model wrote it: the
  // HTTP face checks them, a cut reply's may be unfinished.)
  for (const waste::ToolCall& call : whole.harmony_calls) {
    WCHECK(!call.name.empty()) << "a call without a name";
  }
  for (const waste::ToolCall& call : whole.calls) {
    WCHECK(!call.name.empty()) << "a call without a name";
    WCHECK(nlohmann::json::parse(call.arguments, nullptr, false).is_object())
        << "arguments are not an object: " << call.arguments;
  }
  return 0;
}
