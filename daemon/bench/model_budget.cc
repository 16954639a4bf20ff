#include "daemon/bench/model_budget.h"

#include <algorithm>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "daemon/config/config.h"
#include "daemon/model/model_plan.h"
#include "storage/env.h"

namespace waste::bench {

void AddBudgetFlags(std::vector<FlagDef>* flags) {
  for (const char* name : {"ram-budget", "vram-budget", "vram-copy-slots", "ctx", "kv-type",
                           "prefetch-depth", "sessions"}) {
    flags->push_back({name, true});
  }
}

int64_t PeakRssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      int64_t kib = 0;
      absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::StripSuffix(line.substr(6), "kB")), &kib);
      return kib * 1024;
    }
  }
  return 0;
}

absl::StatusOr<std::vector<int>> ParseSessions(const ParsedArgs& args, int default_sessions) {
  std::vector<int> out;
  const std::string text = args.GetOr("sessions", std::to_string(default_sessions));
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(part, &n) || n < 1 || n > 32) {
      return absl::InvalidArgumentError(
          absl::StrCat("--sessions takes numbers in 1..32 separated by commas, got ", text));
    }
    out.push_back(n);
  }
  return out;
}

absl::StatusOr<PlannedModel> OpenAndBudget(const std::string& path, const ParsedArgs& args,
                                           int64_t default_ctx, int default_sessions) {
  PlannedModel pm;
  ASSIGN_OR_RETURN(std::vector<int> sessions, ParseSessions(args, default_sessions));
  pm.sessions = *std::max_element(sessions.begin(), sessions.end());
  pm.path = path;
  ASSIGN_OR_RETURN(int64_t ctx, args.GetInt("ctx", default_ctx));
  if (ctx < 1) return absl::InvalidArgumentError(absl::StrCat("--ctx must be positive, got ", ctx));
  std::string kv = args.GetOr("kv-type", "f16");
  if (kv == "f16") {
    pm.kv_type = kernels::ops::KvType::kF16;
  } else if (kv == "f32") {
    pm.kv_type = kernels::ops::KvType::kF32;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--kv-type ", kv, " is not f16 or f32"));
  }
  ASSIGN_OR_RETURN(int64_t depth, args.GetInt("prefetch-depth", pm.options.prefetch_depth));
  if (depth < 0) return absl::InvalidArgumentError("--prefetch-depth must not be negative");
  pm.options.prefetch_depth = static_cast<int>(depth);
  if (std::optional<std::string> vram = args.Get("vram-budget")) {
    ASSIGN_OR_RETURN(int64_t bytes, ParseByteSize(*vram));
    if (bytes < 0) return absl::InvalidArgumentError("--vram-budget must not be negative");
    pm.options.vram_budget_bytes = static_cast<uint64_t>(bytes);
  }
  ASSIGN_OR_RETURN(int64_t copy_slots, args.GetInt("vram-copy-slots", 0));
  if (copy_slots < 0) return absl::InvalidArgumentError("--vram-copy-slots must not be negative");
  pm.options.vram_copy_slots = static_cast<int>(copy_slots);

  ASSIGN_OR_RETURN(pm.gguf, storage::GgufFile::Open(storage::Env::Default(), path));
  ASSIGN_OR_RETURN(pm.model, model::Model::Create(*pm.gguf));
  ASSIGN_OR_RETURN(pm.usable, memory::DetectUsableRam());
  pm.input = model::PlanInputFor(*pm.model, ctx, pm.kv_type, pm.sessions);
  if (std::optional<std::string> budget = args.Get("ram-budget")) {
    ASSIGN_OR_RETURN(int64_t bytes, ParseByteSize(*budget));
    if (bytes <= 0) return absl::InvalidArgumentError("--ram-budget must be positive");
    pm.budget_bytes = static_cast<uint64_t>(bytes);
  } else {
    pm.budget_bytes =
        memory::ComputePlanSizes(pm.input, pm.options, pm.usable.bytes, pm.usable.source)
            .recommended_bytes;
    pm.budget_defaulted = true;
  }
  return pm;
}

}  // namespace waste::bench
