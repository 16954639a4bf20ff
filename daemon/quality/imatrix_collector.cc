#include "daemon/quality/imatrix_collector.h"

#include <chrono>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cli_args.h"
#include "common/status_macros.h"
#include "daemon/kernels/thread_pool.h"
#include "daemon/quality/perplexity.h"

namespace waste::quality {

ImatrixCollector::ImatrixCollector(const storage::GgufFile& gguf, const model::Model& model,
                                   bool include_output)
    : gguf_(gguf), model_(model), include_output_(include_output) {}

ImatrixCollector::Target ImatrixCollector::Trace(memory::ChunkId chunk, uint64_t offset,
                                                 const kernels::WeightView& w) {
  Target target;
  const auto& chunks = model_.chunks();
  if (chunk < 0 || static_cast<size_t>(chunk) >= chunks.size()) return target;
  // The slot offset back to a file offset through the chunk's reads, then
  // to the tensor that holds it.
  std::optional<uint64_t> file_offset;
  for (const memory::ChunkRead& r : chunks[chunk].reads) {
    if (offset >= r.slot_offset && offset < r.slot_offset + r.length) {
      file_offset = r.file_offset + (offset - r.slot_offset);
      break;
    }
  }
  if (!file_offset.has_value()) return target;
  for (const storage::TensorInfo& t : gguf_.tensors()) {
    if (*file_offset < t.offset || *file_offset >= t.offset + t.size) continue;
    if (t.shape.empty() || t.shape[0] != w.cols) return target;
    int64_t n_mat = 1;
    for (size_t d = 2; d < t.shape.size(); ++d) n_mat *= t.shape[d];
    const uint64_t matrix_bytes = t.size / n_mat;
    const uint64_t within = *file_offset - t.offset;
    if (matrix_bytes == 0 || within % matrix_bytes != 0) return target;
    target.matrix = static_cast<int64_t>(within / matrix_bytes);
    if (!absl::StartsWith(t.name, "blk.") && !(include_output_ && t.name == "output.weight")) {
      target.sums = -2;  // Traced, not collected.
      return target;
    }
    auto [it, added] = sums_by_name_.emplace(t.name, static_cast<int>(sums_.size()));
    if (added) {
      Sums s;
      s.name = t.name;
      s.cols = t.shape[0];
      s.n_mat = n_mat;
      s.sum.assign(n_mat * s.cols, 0.0);
      s.count.assign(n_mat, 0);
      sums_.push_back(std::move(s));
    }
    target.sums = it->second;
    return target;
  }
  return target;
}

void ImatrixCollector::OnProduct(memory::ChunkId chunk, uint64_t offset,
                                 const kernels::WeightView& w, const float* x, int64_t x_stride,
                                 int64_t n) {
  const uint64_t key = (static_cast<uint64_t>(chunk) << 40) | offset;
  auto it = traced_.find(key);
  if (it == traced_.end()) it = traced_.emplace(key, Trace(chunk, offset, w)).first;
  const Target& target = it->second;
  if (target.sums == -1) {
    ++untraced_;
    return;
  }
  if (target.sums < 0) return;
  Sums& s = sums_[target.sums];
  double* sum = &s.sum[target.matrix * s.cols];
  for (int64_t r = 0; r < n; ++r) {
    const float* row = x + r * x_stride;
    for (int64_t j = 0; j < s.cols; ++j) sum[j] += static_cast<double>(row[j]) * row[j];
  }
  s.count[target.matrix] += n;
  s.used_in_chunk = true;
}

void ImatrixCollector::EndChunk() {
  for (Sums& s : sums_) {
    if (s.used_in_chunk) ++s.ncall;
    s.used_in_chunk = false;
  }
}

ImportanceMatrix ImatrixCollector::Result(const std::string& dataset,
                                          std::vector<std::string>* warnings) const {
  ImportanceMatrix matrix;
  matrix.dataset = dataset;
  for (const Sums& s : sums_) {
    if (s.ncall == 0) continue;
    matrix.last_call = std::max(matrix.last_call, s.ncall);
    ImatrixEntry entry;
    entry.ncall = s.ncall;
    entry.values.resize(s.sum.size());
    int64_t unused = 0;
    for (int64_t m = 0; m < s.n_mat; ++m) {
      if (s.count[m] == 0) ++unused;
      for (int64_t j = 0; j < s.cols; ++j) {
        // An unreached matrix: every column equally important.
        const double mean = s.count[m] > 0 ? s.sum[m * s.cols + j] / s.count[m] : 1.0;
        entry.values[m * s.cols + j] = static_cast<float>(mean * s.ncall);
      }
    }
    if (unused > 0 && warnings != nullptr) {
      warnings->push_back(absl::StrCat(s.name, ": ", unused, " of ", s.n_mat,
                                       " matrices saw no token (importance 1 stored for them)"));
    }
    matrix.entries.emplace(s.name, std::move(entry));
  }
  return matrix;
}

absl::StatusOr<ImatrixRun> ComputeImatrix(storage::Env* env, const std::string& model_path,
                                          const std::string& text_path,
                                          const ImatrixOptions& options) {
  PerplexityOptions ppl_options;
  ppl_options.n_ctx = options.n_ctx;
  ppl_options.max_chunks = options.max_chunks;
  ppl_options.threads = options.threads;
  ASSIGN_OR_RETURN(Evaluation eval, LoadEvaluation(env, model_path, text_path, ppl_options));
  ImatrixCollector collector(*eval.gguf, *eval.model, options.include_output);
  ppl_options.observer = &collector;
  int threads = options.threads;
  if (threads <= 0) threads = kernels::ThreadPool::DefaultThreads();
  kernels::ThreadPool pool(threads);
  ASSIGN_OR_RETURN(
      PerplexityResult ppl,
      ComputePerplexity(*eval.model, eval.store.get(), &pool, eval.tokens, eval.bos, ppl_options,
                        [&collector](int64_t, double) { collector.EndChunk(); }));
  if (collector.untraced() > 0) {
    return absl::InternalError(absl::StrCat(
        collector.untraced(), " products could not be traced to a tensor of ", model_path));
  }
  ImatrixRun run;
  const size_t slash = text_path.find_last_of('/');
  run.matrix = collector.Result(
      slash == std::string::npos ? text_path : text_path.substr(slash + 1), &run.warnings);
  if (run.matrix.entries.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(model_path, ": no blk.* weight matrix was used; nothing to calibrate"));
  }
  run.n_tokens = ppl.n_tokens;
  run.n_chunks = ppl.n_chunks;
  run.ppl = ppl.ppl;
  return run;
}

int RunImatrix(const std::vector<std::string>& args) {
  constexpr char kUsage[] =
      "usage: wasted imatrix MODEL.gguf TEXT_FILE -o|--output IMATRIX.dat [--ctx N] [--chunks N]\n"
      "                      [--threads N] [--process-output]\n"
      "  Runs MODEL over TEXT_FILE and writes, per weight matrix, the mean squared\n"
      "  activation of each input column (llama.cpp's legacy imatrix format), for\n"
      "  `wasted quantize --imatrix`.\n"
      "  --ctx N            tokens per chunk (default 512, as llama-imatrix)\n"
      "  --chunks N         evaluate at most N chunks\n"
      "  --process-output   also collect output.weight\n";
  // -o, as llama-imatrix spells it, is --output.
  std::vector<std::string> flags(args);
  for (std::string& a : flags) {
    if (a == "-o") a = "--output";
  }
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(
      flags,
      {{"output"}, {"ctx"}, {"chunks"}, {"threads"}, {"process-output", false}, {"help", false}});
  if (!parsed.ok()) {
    std::cerr << "wasted imatrix: " << parsed.status().message() << "\n" << kUsage;
    return 2;
  }
  if (parsed->Has("help")) {
    std::cout << kUsage;
    return 0;
  }
  const std::string out = parsed->GetOr("output", "");
  if (parsed->positional().size() != 2 || out.empty()) {
    std::cerr << "wasted imatrix: need MODEL.gguf, TEXT_FILE and -o IMATRIX.dat\n" << kUsage;
    return 2;
  }
  ImatrixOptions options;
  absl::Status flags_status;
  auto get_int = [&](const char* name, int64_t fallback) {
    absl::StatusOr<int64_t> v = parsed->GetInt(name, fallback);
    if (!v.ok()) flags_status.Update(v.status());
    return v.value_or(fallback);
  };
  options.n_ctx = get_int("ctx", options.n_ctx);
  options.max_chunks = get_int("chunks", -1);
  options.threads = static_cast<int>(get_int("threads", 0));
  options.include_output = parsed->Has("process-output");
  if (!flags_status.ok()) {
    std::cerr << "wasted imatrix: " << flags_status.message() << "\n";
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  storage::Env* env = storage::Env::Default();
  absl::StatusOr<ImatrixRun> run =
      ComputeImatrix(env, parsed->positional()[0], parsed->positional()[1], options);
  absl::Status status = run.ok() ? WriteImatrix(env, out, run->matrix) : run.status();
  if (!status.ok()) {
    std::cerr << "wasted imatrix: " << status.message() << "\n";
    return 1;
  }
  for (const std::string& w : run->warnings) std::cerr << "wasted imatrix: warning: " << w << "\n";
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << absl::StrFormat(
      "wrote %s: %d matrices, %d chunks of %d tokens (%d tokens in the text), PPL %.4f, %.1f s\n",
      out, run->matrix.entries.size(), run->n_chunks, options.n_ctx, run->n_tokens, run->ppl,
      seconds);
  return 0;
}

}  // namespace waste::quality
