#include "daemon/tools/mkmodel.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cli_args.h"
#include "common/format.h"
#include "common/status_macros.h"
#include "daemon/kernels/quant_blocks.h"
#include "storage/ggml_types.h"

namespace waste::tools {
namespace {

using storage::GgmlType;

constexpr char kUsage[] = R"(usage: wasted mkmodel --out FILE [flags]

Writes a synthetic GGUF model (random weights, llama.cpp's names and keys).

  --arch A            llama | qwen2 | qwen3 | mixtral | qwen3moe | deepseek2 | gpt-oss |
                      glm4moe | gemma | gemma2 | gemma3 (llama)
  --out FILE          where to write (required)
  --type T            matrix type: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k
                      q5_k q6_k iq4_nl iq4_xs iq3_s iq3_xxs iq2_s iq2_xs iq2_xxs
                      iq1_m iq1_s mxfp4 (q8_0)
  --dim N --layers N --heads N --kv-heads N --head-dim N --ffn N --ctx N
  --vocab N           token count (default: the tokenizer's)
  --experts N --experts-used N --expert-ffn N     MoE archs
  --shared-experts N --dense-layers N             deepseek2, glm4moe
  --rope-dim N        deepseek2: MLA's roped dims; glm4moe: the rotated dims
                      of each head (head-dim / 2)
  --q-lora-rank N --kv-lora-rank N                deepseek2 (MLA)
  --mla-fused         deepseek2: one attn_kv_b per layer, as files converted
                      before llama.cpp's MLA split (spring 2025) have it
  --sliding-window N  gpt-oss, gemma2, gemma3: positions the windowed layers attend
                      to (128)
  --no-qk-norm        glm4moe: no Q/K norms (GLM-4.5-Air's form)
  --seed S            weights are a function of the seed (1)
  --tokenizer-from F  copy every tokenizer.* key from GGUF F (default: a
                      built-in byte-level BPE vocabulary)
  --chat-template F   the Jinja chat template in file F, as the model's own
                      (tokenizer.chat_template: waste renders its family)
  --threads N         generator threads (default: all cores)
)";

}  // namespace

absl::StatusOr<MkModelOptions> ParseMkModelArgs(const std::vector<std::string>& args) {
  std::vector<FlagDef> defs = {{"help", false}, {"mla-fused", false}, {"no-qk-norm", false}};
  for (const char* name : {"arch",
                           "out",
                           "type",
                           "dim",
                           "layers",
                           "heads",
                           "kv-heads",
                           "head-dim",
                           "ffn",
                           "vocab",
                           "ctx",
                           "experts",
                           "experts-used",
                           "expert-ffn",
                           "shared-experts",
                           "dense-layers",
                           "q-lora-rank",
                           "kv-lora-rank",
                           "rope-dim",
                           "seed",
                           "tokenizer-from",
                           "threads",
                           "sliding-window",
                           "chat-template"}) {
    defs.push_back({name, true});
  }
  ASSIGN_OR_RETURN(ParsedArgs parsed, ParseArgs(args, defs));
  if (parsed.Has("help")) return absl::CancelledError(kUsage);
  if (!parsed.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", parsed.positional()[0], "'; see --help"));
  }
  MkModelOptions o;
  const std::string arch = parsed.GetOr("arch", "llama");
  if (!ParseSyntheticArch(arch, &o.arch)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--arch ", arch,
                     " is not one of llama, qwen2, qwen3, mixtral, qwen3moe, deepseek2, gpt-oss, "
                     "glm4moe, gemma, gemma2, gemma3"));
  }
  o.out = parsed.GetOr("out", "");
  if (o.out.empty()) return absl::InvalidArgumentError("--out FILE is required");
  const std::string type = parsed.GetOr("type", "q8_0");
  std::optional<GgmlType> ggml_type = storage::ParseGgmlType(type);
  if (!ggml_type.has_value() ||
      !kernels::IsSupportedWeightType(static_cast<uint32_t>(*ggml_type))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--type ", type,
        " is not one of f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k iq4_nl "
        "iq4_xs iq3_s iq3_xxs iq2_s iq2_xs iq2_xxs iq1_m iq1_s mxfp4"));
  }
  o.type = *ggml_type;
  struct IntFlag {
    const char* name;
    int64_t* field;
  };
  for (IntFlag flag : {IntFlag{"dim", &o.dim},
                       {"layers", &o.layers},
                       {"heads", &o.heads},
                       {"kv-heads", &o.kv_heads},
                       {"head-dim", &o.head_dim},
                       {"ffn", &o.ffn},
                       {"vocab", &o.vocab},
                       {"ctx", &o.ctx},
                       {"experts", &o.experts},
                       {"experts-used", &o.experts_used},
                       {"expert-ffn", &o.expert_ffn},
                       {"shared-experts", &o.shared_experts},
                       {"dense-layers", &o.dense_layers},
                       {"q-lora-rank", &o.q_lora_rank},
                       {"kv-lora-rank", &o.kv_lora_rank},
                       {"rope-dim", &o.rope_dim},
                       {"sliding-window", &o.sliding_window}}) {
    ASSIGN_OR_RETURN(*flag.field, parsed.GetInt(flag.name, *flag.field));
    if (parsed.Has(flag.name) && *flag.field < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag.name, " must not be negative, got ", *flag.field));
    }
  }
  ASSIGN_OR_RETURN(int64_t seed, parsed.GetInt("seed", 1));
  o.seed = static_cast<uint64_t>(seed);
  ASSIGN_OR_RETURN(int64_t threads, parsed.GetInt("threads", 0));
  o.threads = static_cast<int>(std::clamp<int64_t>(threads, 0, 256));
  o.tokenizer_from = parsed.GetOr("tokenizer-from", "");
  if (parsed.Has("chat-template")) {
    const std::string path = parsed.GetOr("chat-template", "");
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in || text.str().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--chat-template: cannot read a template from ", path));
    }
    o.chat_template = text.str();
  }
  o.mla_fused = parsed.Has("mla-fused");
  if (parsed.Has("no-qk-norm")) {
    if (o.arch != SyntheticArch::kGlm4Moe) {
      return absl::InvalidArgumentError("--no-qk-norm applies to --arch glm4moe only");
    }
    o.qk_norm = false;
  }
  return o;
}

int RunMkModel(const std::vector<std::string>& args) {
  absl::StatusOr<MkModelOptions> options = ParseMkModelArgs(args);
  if (!options.ok()) {
    if (absl::IsCancelled(options.status())) {
      std::cout << options.status().message();
      return 0;
    }
    std::cerr << "wasted mkmodel: " << options.status().message() << "\n";
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<MkModelResult> result = WriteSyntheticModel(*options, storage::Env::Default());
  if (!result.ok()) {
    std::cerr << "wasted mkmodel: " << result.status().message() << "\n";
    return 1;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << absl::StrFormat(
      "wrote %s: %s (%s), %d tensors, %d parameters, vocab %d, %s in %.1f s (%.0f MB/s)\n",
      options->out, result->arch, std::string(storage::GgmlTypeName(options->type)),
      result->tensors, result->params, result->vocab, FormatBytes(result->file_bytes), seconds,
      result->file_bytes / 1e6 / std::max(seconds, 1e-9));
  return 0;
}

}  // namespace waste::tools
