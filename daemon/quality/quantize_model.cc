#include "daemon/quality/quantize_model.h"

#include <fnmatch.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/cli_args.h"
#include "common/status_macros.h"
#include "daemon/kernels/dequantize.h"
#include "daemon/kernels/quant_blocks.h"
#include "daemon/kernels/quantize.h"
#include "daemon/kernels/thread_pool.h"
#include "storage/gguf_writer.h"
#include "storage/split_gguf.h"

namespace waste::quality {
namespace {

using storage::GgmlType;

// Bytes of f32 rows converted per piece: large enough that reads and the
// thread pool are efficient, small enough that memory stays flat.
constexpr int64_t kPieceF32Bytes = 16 << 20;

constexpr char kFileTypeKey[] = "general.file_type";
constexpr char kQuantVersionKey[] = "general.quantization_version";
constexpr uint32_t kGgmlQuantVersion = 2;  // GGML_QNT_VERSION.

struct TargetType {
  const char* flag;
  GgmlType type;
  uint32_t llama_ftype;  // LLAMA_FTYPE_* in llama.h.
};

// K-quants map to the _S ("small") file types: every converted matrix has
// the one type, which is what the _S mixes come closest to.
constexpr TargetType kTargets[] = {
    {"q8_0", GgmlType::kQ8_0, 7},        {"q4_0", GgmlType::kQ4_0, 2},
    {"q4_1", GgmlType::kQ4_1, 3},        {"q5_0", GgmlType::kQ5_0, 8},
    {"q5_1", GgmlType::kQ5_1, 9},        {"q4_k", GgmlType::kQ4_K, 14},
    {"q5_k", GgmlType::kQ5_K, 16},       {"q6_k", GgmlType::kQ6_K, 18},
    {"q2_k", GgmlType::kQ2_K, 10},       {"q3_k", GgmlType::kQ3_K, 11},
    {"iq4_nl", GgmlType::kIQ4_NL, 25},   {"iq4_xs", GgmlType::kIQ4_XS, 30},
    {"iq3_s", GgmlType::kIQ3_S, 26},     {"iq3_xxs", GgmlType::kIQ3_XXS, 23},
    {"iq2_s", GgmlType::kIQ2_S, 28},     {"iq2_xs", GgmlType::kIQ2_XS, 20},
    {"iq2_xxs", GgmlType::kIQ2_XXS, 19}, {"iq1_m", GgmlType::kIQ1_M, 31},
    {"iq1_s", GgmlType::kIQ1_S, 24},     {"f16", GgmlType::kF16, 1},
    {"bf16", GgmlType::kBF16, 32},       {"mxfp4", GgmlType::kMXFP4, 38},  // MXFP4_MOE
};

std::string TargetList() {
  std::vector<std::string> names;
  for (const TargetType& t : kTargets) names.push_back(t.flag);
  return absl::StrJoin(names, ", ");
}

bool IsFloatType(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16;
}

kernels::WeightType ToWeightType(GgmlType type) {
  return static_cast<kernels::WeightType>(static_cast<uint32_t>(type));
}

bool RequiresImportance(GgmlType type) {
  return kernels::QuantizeRequiresImportance(ToWeightType(type));
}

// The IQ1/IQ2 and IQ3_XXS targets, for which llama.cpp picks other types
// for the embeddings and the head.
bool IsLowBitGridTarget(GgmlType type) {
  switch (type) {
    case GgmlType::kIQ1_S:
    case GgmlType::kIQ1_M:
    case GgmlType::kIQ2_XXS:
    case GgmlType::kIQ2_XS:
    case GgmlType::kIQ2_S:
    case GgmlType::kIQ3_XXS:
      return true;
    default:
      return false;
  }
}

// How one tensor is written.
struct TensorPlan {
  const storage::TensorInfo* info;
  GgmlType out_type;
  bool convert;
  // Per column of each matrix ([n_mat * cols]); empty: plain rounding.
  std::vector<float> importance;
  // The importance matrix had no entry: all ones.
  bool uniform_importance = false;
};

// The target type of `t`, by llama.cpp's rules for the head and the token
// embeddings (llama_tensor_get_type).
GgmlType TensorTarget(const storage::TensorInfo& t, const std::string& head, GgmlType type) {
  if (t.shape.empty()) return type;
  // The output head (or the token embeddings that stand in for it) is the
  // matrix whose precision matters most; llama.cpp gives it Q6_K whatever
  // the lower-bit target (Q5_K for the IQ1/IQ2/IQ3_XXS ones), or Q8_0 where
  // rows do not divide into 256.
  if (t.name == head && type != GgmlType::kQ8_0 && !IsFloatType(type)) {
    if (t.shape[0] % kernels::kQK_K != 0) return GgmlType::kQ8_0;
    return IsLowBitGridTarget(type) ? GgmlType::kQ5_K : GgmlType::kQ6_K;
  }
  // llama.cpp's MXFP4_MOE: the expert stacks (3-D) MXFP4, every other
  // matrix Q8_0.
  if (type == GgmlType::kMXFP4) {
    return t.shape.size() >= 3 && t.shape[2] > 1 ? GgmlType::kMXFP4 : GgmlType::kQ8_0;
  }
  // Untied token embeddings: looked up, never multiplied, so no importance
  // is ever collected for them.
  if (t.name == "token_embd.weight") {
    if (type == GgmlType::kIQ2_S || type == GgmlType::kIQ3_XXS) return GgmlType::kIQ3_S;
    if (RequiresImportance(type)) return GgmlType::kQ2_K;
  }
  return type;
}

// The importance matrix's entry for a converted tensor, checked for size.
absl::Status AttachImportance(const storage::GgufFile& gguf, const ImportanceMatrix& imatrix,
                              TensorPlan* plan) {
  const storage::TensorInfo& t = *plan->info;
  const ImatrixEntry* entry = imatrix.Find(t.name);
  if (entry == nullptr) {
    if (RequiresImportance(plan->out_type)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "tensor '", t.name, "' has no entry in the importance matrix, and ",
          std::string(storage::GgmlTypeName(plan->out_type)),
          " cannot be made without one (llama-quantize refuses too): compute the matrix on this "
          "model with `wasted imatrix`"));
    }
    // No activations seen (token_embd, an uncollected head): still the
    // weighted search, with every column equally important.
    int64_t n_mat = 1;
    for (size_t d = 2; d < t.shape.size(); ++d) n_mat *= t.shape[d];
    plan->importance.assign(t.shape[0] * n_mat, 1.0f);
    plan->uniform_importance = true;
    return absl::OkStatus();
  }
  int64_t n_mat = 1;
  for (size_t d = 2; d < t.shape.size(); ++d) n_mat *= t.shape[d];
  const int64_t expected = t.shape[0] * n_mat;
  if (static_cast<int64_t>(entry->values.size()) != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("the importance matrix has ", entry->values.size(), " values for '", t.name,
                     "', which has ", t.shape[0], " columns x ", n_mat, " matrices = ", expected,
                     ": the matrix was computed on another model (", gguf.path(), ")"));
  }
  plan->importance = entry->Importance();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TensorPlan>> PlanTensors(const storage::GgufFile& gguf,
                                                    const QuantizeOptions& options,
                                                    QuantizeReport* report) {
  if (RequiresImportance(options.type) && options.imatrix == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(storage::GgmlTypeName(options.type)),
        " needs an importance matrix (llama-quantize refuses IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS and "
        "IQ2_S without one too): compute it with `wasted imatrix MODEL TEXT -o FILE` and pass "
        "--imatrix FILE"));
  }
  const std::string head =
      gguf.FindTensor("output.weight") != nullptr ? "output.weight" : "token_embd.weight";
  std::vector<TensorPlan> plans;
  for (const storage::TensorInfo& t : gguf.tensors()) {
    TensorPlan plan{&t, t.type, false, {}};
    GgmlType target = options.pure ? options.type : TensorTarget(t, head, options.type);
    for (const QuantizeOptions::TensorTypeOverride& o : options.tensor_types) {
      if (fnmatch(o.glob.c_str(), t.name.c_str(), 0) == 0) {
        target = o.type;
        break;
      }
    }
    const int64_t block = storage::GetGgmlTypeTraits(target).block_size;
    const uint32_t id = static_cast<uint32_t>(t.type);
    if (IsQuantizableWeight(t) && t.type != target && kernels::IsSupportedWeightType(id)) {
      if (t.shape[0] % block != 0) {
        report->kept_ragged.push_back(t.name);
      } else if (!IsFloatType(t.type) && !options.allow_requantize) {
        return absl::InvalidArgumentError(absl::StrCat(
            gguf.path(), ": tensor '", t.name, "' is already quantized (",
            std::string(storage::GgmlTypeName(t.type)),
            "); quantize from the F32/F16/BF16 model, or pass --allow-requantize to convert "
            "it anyway (quality drops twice)"));
      } else {
        plan.out_type = target;
        plan.convert = true;
        if (options.imatrix == nullptr && RequiresImportance(target)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "tensor '", t.name, "' would be ", std::string(storage::GgmlTypeName(target)),
              ", which needs an importance matrix: pass --imatrix FILE (wasted imatrix makes "
              "one)"));
        }
        if (options.imatrix != nullptr) {
          RETURN_IF_ERROR(AttachImportance(gguf, *options.imatrix, &plan));
          if (plan.uniform_importance) {
            report->unweighted.push_back(t.name);
          } else {
            ++report->weighted;
          }
        }
      }
    }
    ++(plan.convert ? report->converted : report->kept);
    plans.push_back(std::move(plan));
  }
  report->tensors = static_cast<int64_t>(plans.size());
  return plans;
}

absl::Status AddMetadata(const storage::GgufFile& gguf, uint32_t ftype,
                         storage::GgufWriter* writer) {
  bool have_ftype = false;
  bool have_version = false;
  for (const auto& [key, value] : gguf.metadata()) {
    // The writer sets the alignment from its options; the output is one
    // file, whatever parts a split input came in.
    if (key == storage::kGgufAlignmentKey || key == storage::kSplitNoKey ||
        key == storage::kSplitCountKey || key == storage::kSplitTensorsCountKey) {
      continue;
    }
    if (key == kFileTypeKey) {
      RETURN_IF_ERROR(writer->AddUint32(key, ftype));
      have_ftype = true;
    } else if (key == kQuantVersionKey) {
      RETURN_IF_ERROR(writer->AddUint32(key, kGgmlQuantVersion));
      have_version = true;
    } else {
      RETURN_IF_ERROR(writer->AddMetadata(key, value));
    }
  }
  if (!have_version) RETURN_IF_ERROR(writer->AddUint32(kQuantVersionKey, kGgmlQuantVersion));
  if (!have_ftype) RETURN_IF_ERROR(writer->AddUint32(kFileTypeKey, ftype));
  return absl::OkStatus();
}

// Streams a tensor's bytes unchanged, a piece at a time.
absl::Status CopyTensor(const storage::RandomAccessFile& file, const storage::TensorInfo& t,
                        storage::GgufWriter* writer, std::vector<uint8_t>* buffer) {
  for (uint64_t done = 0; done < t.size;) {
    const uint64_t n = std::min<uint64_t>(t.size - done, kPieceF32Bytes);
    buffer->resize(n);
    RETURN_IF_ERROR(file.Read(t.offset + done, n, reinterpret_cast<char*>(buffer->data())));
    RETURN_IF_ERROR(
        writer->AppendTensorData(t.name, {reinterpret_cast<const char*>(buffer->data()), n}));
    done += n;
  }
  return absl::OkStatus();
}

// Converts a tensor a piece of rows at a time: decode each row to f32,
// encode it in the target type.
absl::Status ConvertTensor(const storage::RandomAccessFile& file, const TensorPlan& plan,
                           kernels::ThreadPool* pool, storage::GgufWriter* writer,
                           std::vector<uint8_t>* in_buf, std::vector<uint8_t>* out_buf) {
  const storage::TensorInfo& t = *plan.info;
  const int64_t cols = t.shape[0];
  const int64_t rows = t.NumRows();
  const int64_t rows_per_matrix = t.shape.size() > 1 ? t.shape[1] : 1;
  const uint64_t in_row = *storage::GgmlRowSize(t.type, cols);
  const uint64_t out_row = *storage::GgmlRowSize(plan.out_type, cols);
  const int64_t piece_rows =
      std::max<int64_t>(1, kPieceF32Bytes / static_cast<int64_t>(cols * sizeof(float)));
  const kernels::WeightType in_type = ToWeightType(t.type);
  const kernels::WeightType out_type = ToWeightType(plan.out_type);
  for (int64_t r0 = 0; r0 < rows; r0 += piece_rows) {
    const int64_t n = std::min(piece_rows, rows - r0);
    in_buf->resize(n * in_row);
    out_buf->resize(n * out_row);
    RETURN_IF_ERROR(
        file.Read(t.offset + r0 * in_row, n * in_row, reinterpret_cast<char*>(in_buf->data())));
    const uint8_t* src = in_buf->data();
    uint8_t* dst = out_buf->data();
    pool->ParallelFor(n, [&](int64_t begin, int64_t end) {
      std::vector<float> row(cols);
      for (int64_t r = begin; r < end; ++r) {
        kernels::DequantizeRow(in_type, src + r * in_row, row.data(), cols);
        // A 3-D stack's matrix m has rows m * rows_per_matrix onwards.
        const float* importance =
            plan.importance.empty() ? nullptr : &plan.importance[(r0 + r) / rows_per_matrix * cols];
        kernels::QuantizeRowWeighted(out_type, row.data(), dst + r * out_row, cols, importance);
      }
    });
    RETURN_IF_ERROR(writer->AppendTensorData(
        t.name, {reinterpret_cast<const char*>(out_buf->data()), out_buf->size()}));
  }
  return absl::OkStatus();
}

absl::Status WriteQuantized(const storage::GgufFile& gguf, const storage::RandomAccessFile& file,
                            const std::vector<TensorPlan>& plans, uint32_t ftype, int threads,
                            storage::WritableFile* out) {
  storage::WritableFileSink sink(out);
  storage::GgufWriterOptions writer_options;
  writer_options.alignment = gguf.alignment();
  storage::GgufWriter writer(&sink, writer_options);
  RETURN_IF_ERROR(AddMetadata(gguf, ftype, &writer));
  for (const TensorPlan& plan : plans) {
    RETURN_IF_ERROR(writer.AddTensor(plan.info->name, plan.out_type, plan.info->shape).status());
  }
  RETURN_IF_ERROR(writer.WriteHeader());
  kernels::ThreadPool pool(threads);
  std::vector<uint8_t> in_buf, out_buf;
  for (const TensorPlan& plan : plans) {
    absl::Status status = plan.convert
                              ? ConvertTensor(file, plan, &pool, &writer, &in_buf, &out_buf)
                              : CopyTensor(file, *plan.info, &writer, &in_buf);
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("tensor '", plan.info->name, "': ", status.message()));
    }
  }
  return writer.Finish();
}

}  // namespace

absl::StatusOr<GgmlType> ParseQuantizeType(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  for (const TargetType& t : kTargets) {
    if (lower == t.flag) return t.type;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--type: unknown or unsupported type '", std::string(name), "'; use one of ", TargetList()));
}

absl::StatusOr<QuantizeOptions::TensorTypeOverride> ParseTensorTypeOverride(std::string_view flag) {
  const size_t eq = flag.rfind('=');
  if (eq == std::string_view::npos || eq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tensor-type '", std::string(flag),
                     "': expected GLOB=TYPE, e.g. 'blk.*.ffn_down_exps.weight=q4_k'"));
  }
  ASSIGN_OR_RETURN(const GgmlType type, ParseQuantizeType(flag.substr(eq + 1)));
  return QuantizeOptions::TensorTypeOverride{std::string(flag.substr(0, eq)), type};
}

std::optional<uint32_t> LlamaFileType(GgmlType type) {
  for (const TargetType& t : kTargets) {
    if (t.type == type) return t.llama_ftype;
  }
  return std::nullopt;
}

bool IsQuantizableWeight(const storage::TensorInfo& tensor) {
  const std::string& name = tensor.name;
  if (tensor.shape.size() < 2 || !absl::EndsWith(name, "weight")) return false;
  // Small tensors whose precision matters more than their size, as in
  // llama.cpp's llama_tensor_get_type / quantize rules.
  for (const char* keep : {"_norm.weight", "ffn_gate_inp.weight", "pos_embd", "token_types",
                           "ssm_conv1d", "ssm_x", "ssm_dt", "time_mix_first", "time_mix_w1",
                           "time_mix_w2", "time_mix_decay_w1", "time_mix_decay_w2"}) {
    if (absl::StrContains(name, keep)) return false;
  }
  return true;
}

absl::StatusOr<QuantizeReport> QuantizeModel(storage::Env* env, const std::string& in,
                                             const std::string& out,
                                             const QuantizeOptions& options) {
  const std::optional<uint32_t> ftype = LlamaFileType(options.type);
  if (!ftype.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("quantize cannot write type ",
                                                   std::string(GgmlTypeName(options.type)),
                                                   "; use one of ", TargetList()));
  }
  if (!env->FileExists(in)) {
    return absl::NotFoundError(
        absl::StrCat(in, ": no such file; pass the path of a GGUF model to quantize"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<storage::GgufFile> gguf, storage::GgufFile::Open(env, in));
  ASSIGN_OR_RETURN(std::unique_ptr<storage::RandomAccessFile> file,
                   storage::OpenModelFile(env, *gguf));
  QuantizeReport report;
  ASSIGN_OR_RETURN(std::vector<TensorPlan> plans, PlanTensors(*gguf, options, &report));
  int threads = options.threads;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  const std::string tmp = out + ".quantize-tmp";
  {
    ASSIGN_OR_RETURN(std::unique_ptr<storage::WritableFile> sink, env->NewWritableFile(tmp));
    absl::Status status = WriteQuantized(*gguf, *file, plans, *ftype, threads, sink.get());
    if (status.ok()) status = sink->Sync();
    if (status.ok()) status = sink->Close();
    if (!status.ok()) {
      sink.reset();
      env->DeleteFile(tmp).IgnoreError();
      return absl::Status(status.code(),
                          absl::StrCat("quantizing ", in, " into ", out, ": ", status.message()));
    }
  }
  RETURN_IF_ERROR(env->RenameFile(tmp, out));
  report.in_bytes = gguf->disk_bytes();
  ASSIGN_OR_RETURN(report.out_bytes, env->GetFileSize(out));
  return report;
}

int RunQuantize(const std::vector<std::string>& args) {
  constexpr char kUsage[] =
      "usage: wasted quantize IN.gguf OUT.gguf --type TYPE [--imatrix FILE] [--threads N]\n"
      "                       [--pure] [--tensor-type GLOB=TYPE ...] [--allow-requantize]\n"
      "  TYPE: q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs iq3_s\n"
      "        iq3_xxs iq2_s iq2_xs iq2_xxs iq1_m iq1_s mxfp4 f16 bf16\n"
      "        (mxfp4: the expert matrices, the others q8_0, as llama.cpp's MXFP4_MOE)\n"
      "  --imatrix FILE  column importances (wasted imatrix, or llama.cpp's llama-imatrix):\n"
      "                  a weighted scale search instead of plain rounding; required for\n"
      "                  iq2_s iq2_xs iq2_xxs iq1_m iq1_s\n"
      "  --pure          every matrix TYPE, the output head and token_embd included\n"
      "                  (llama-quantize --pure)\n"
      "  --tensor-type GLOB=T  matrices whose name matches GLOB (* ? [..]) become T instead;\n"
      "                  repeatable, the first match wins (e.g. "
      "'blk.*.ffn_down_exps.weight=q4_k')\n";
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, {{"type"},
                                                       {"imatrix"},
                                                       {"threads"},
                                                       {"pure", false},
                                                       {"tensor-type"},
                                                       {"allow-requantize", false},
                                                       {"help", false}});
  if (!parsed.ok()) {
    std::cerr << "wasted quantize: " << parsed.status().message() << "\n" << kUsage;
    return 2;
  }
  if (parsed->Has("help")) {
    std::cout << kUsage;
    return 0;
  }
  if (parsed->positional().size() != 2 || !parsed->Has("type")) {
    std::cerr << "wasted quantize: need IN.gguf, OUT.gguf and --type\n" << kUsage;
    return 2;
  }
  QuantizeOptions options;
  absl::StatusOr<GgmlType> type = ParseQuantizeType(*parsed->Get("type"));
  absl::StatusOr<int64_t> threads = parsed->GetInt("threads", 0);
  if (!type.ok() || !threads.ok()) {
    std::cerr << "wasted quantize: " << (!type.ok() ? type.status() : threads.status()).message()
              << "\n";
    return 2;
  }
  options.type = *type;
  options.threads = static_cast<int>(*threads);
  options.allow_requantize = parsed->Has("allow-requantize");
  options.pure = parsed->Has("pure");
  for (const std::string& flag : parsed->GetAll("tensor-type")) {
    absl::StatusOr<QuantizeOptions::TensorTypeOverride> o = ParseTensorTypeOverride(flag);
    if (!o.ok()) {
      std::cerr << "wasted quantize: " << o.status().message() << "\n";
      return 2;
    }
    options.tensor_types.push_back(*o);
  }
  const std::string& in = parsed->positional()[0];
  const std::string& out = parsed->positional()[1];

  const auto start = std::chrono::steady_clock::now();
  std::optional<ImportanceMatrix> imatrix;
  if (parsed->Has("imatrix")) {
    absl::StatusOr<ImportanceMatrix> read =
        ReadImatrix(storage::Env::Default(), *parsed->Get("imatrix"));
    if (!read.ok()) {
      std::cerr << "wasted quantize: " << read.status().message() << "\n";
      return 1;
    }
    imatrix = std::move(*read);
    options.imatrix = &*imatrix;
    std::cout << absl::StrFormat("importance matrix %s: %d entries, %d chunks of '%s'\n",
                                 *parsed->Get("imatrix"), imatrix->entries.size(),
                                 imatrix->last_call, imatrix->dataset);
  }
  absl::StatusOr<QuantizeReport> report = QuantizeModel(storage::Env::Default(), in, out, options);
  if (!report.ok()) {
    std::cerr << "wasted quantize: " << report.status().message() << "\n";
    return 1;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << absl::StrFormat(
      "wrote %s: %s, %d of %d tensors converted, %d kept; %.2f MB -> %.2f MB in %.1f s\n", out,
      std::string(storage::GgmlTypeName(options.type)), report->converted, report->tensors,
      report->kept, report->in_bytes / 1e6, report->out_bytes / 1e6, seconds);
  if (options.imatrix != nullptr) {
    std::cout << absl::StrFormat("%d matrices weighted by the importance matrix", report->weighted);
    if (!report->unweighted.empty()) {
      std::cout << "; without an entry (searched with equal importances): "
                << absl::StrJoin(report->unweighted, ", ");
    }
    std::cout << "\n";
  }
  if (!report->kept_ragged.empty()) {
    std::cout << "kept (rows not a multiple of the " << storage::GgmlTypeName(options.type)
              << " block): " << absl::StrJoin(report->kept_ragged, ", ") << "\n";
  }
  return 0;
}

}  // namespace waste::quality
