#include "common/tool_call.h"

namespace waste {

const char* ToolFormatName(ToolFormat format) {
  switch (format) {
    case ToolFormat::kHermes:
      return "hermes";
    case ToolFormat::kGlm:
      return "glm";
    case ToolFormat::kKimiK2:
      return "kimi-k2";
    case ToolFormat::kHarmony:
      return "harmony";
    case ToolFormat::kNone:
      break;
  }
  return "";
}

ToolFormat ParseToolFormat(std::string_view name) {
  for (ToolFormat f :
       {ToolFormat::kHermes, ToolFormat::kGlm, ToolFormat::kKimiK2, ToolFormat::kHarmony}) {
    if (name == ToolFormatName(f)) return f;
  }
  return ToolFormat::kNone;
}

}  // namespace waste
