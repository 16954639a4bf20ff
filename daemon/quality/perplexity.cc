#include "daemon/quality/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cli_args.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "daemon/cache/resident_store.h"
#include "daemon/model/forward.h"
#include "daemon/quality/kl_divergence.h"
#include "daemon/text/tokenizer.h"
#include "daemon/text/vocab_gguf.h"
#include "storage/gguf.h"
#include "storage/split_gguf.h"

namespace waste::quality {
namespace {

// -log p(token) from one position's logits, as llama.cpp's log_softmax:
// float max and differences, double sum.
double TokenNll(const float* logits, int64_t n_vocab, int32_t token) {
  float max_logit = logits[0];
  for (int64_t i = 1; i < n_vocab; ++i) max_logit = std::max(max_logit, logits[i]);
  double sum_exp = 0;
  for (int64_t i = 0; i < n_vocab; ++i) sum_exp += std::exp(logits[i] - max_logit);
  return -(static_cast<double>(logits[token] - max_logit) - std::log(sum_exp));
}

double RunningPpl(double nll_sum, int64_t count) {
  return count > 0 ? std::exp(nll_sum / static_cast<double>(count)) : 0.0;
}

// Options and text length, checked before any weight is read.
absl::Status CheckInput(int64_t n_tokens, const PerplexityOptions& options) {
  const int64_t n_ctx = options.n_ctx;
  const int64_t stride = options.stride == 0 ? n_ctx : options.stride;
  if (n_ctx < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ctx ", n_ctx,
                     " is too small: each chunk must score at least one token; "
                     "use 3 or more (llama.cpp's usual value is 512)"));
  }
  if (stride < 1 || stride > n_ctx) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stride ", options.stride, " must be between 1 and --ctx (", n_ctx, ")"));
  }
  if (n_tokens < 2 * n_ctx) {
    return absl::InvalidArgumentError(
        absl::StrCat("the text tokenizes to only ", n_tokens,
                     " tokens; perplexity with a context of ", n_ctx, " needs at least ", 2 * n_ctx,
                     " (llama.cpp's rule): use a longer text or a smaller --ctx"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PerplexityResult> ComputePerplexity(const model::Model& model,
                                                   cache::ChunkStore* store,
                                                   kernels::ThreadPool* pool,
                                                   std::span<const int32_t> tokens, int32_t bos,
                                                   const PerplexityOptions& options,
                                                   const ChunkCallback& on_chunk) {
  const int64_t n_ctx = options.n_ctx;
  const int64_t stride = options.stride == 0 ? n_ctx : options.stride;
  const int64_t n_tokens = static_cast<int64_t>(tokens.size());
  RETURN_IF_ERROR(CheckInput(n_tokens, options));
  const bool strided = stride < n_ctx;
  const int64_t n_chunk_max = strided ? (n_tokens - n_ctx + stride - 1) / stride : n_tokens / n_ctx;
  const int64_t n_chunk =
      options.max_chunks < 0 ? n_chunk_max : std::min(options.max_chunks, n_chunk_max);
  // The first position whose logits are scored; the last scored is n_ctx-2
  // (its logits predict the chunk's last token).
  const int64_t first_scored = strided ? n_ctx - stride - 1 : n_ctx / 2;
  const int64_t n_vocab = model.hparams().n_vocab;

  PerplexityResult result;
  result.n_tokens = n_tokens;
  model::SequenceState state(model, n_ctx, options.kv_type);
  model::Forward forward(&model, store, pool);
  forward.set_product_observer(options.observer);
  std::vector<int32_t> window(n_ctx);
  std::vector<float> logits(model::kDefaultStepTokens * n_vocab);
  for (int64_t chunk = 0; chunk < n_chunk; ++chunk) {
    const int64_t start = chunk * stride;
    std::copy(tokens.begin() + start, tokens.begin() + start + n_ctx, window.begin());
    if (!strided && bos >= 0) window[0] = bos;
    state.Truncate(0);
    // The unscored prefix needs no logits but its last; the chunk's last
    // token is never an input that predicts anything scored.
    if (first_scored > 0) {
      RETURN_IF_ERROR(forward.Run(&state, std::span(window).first(first_scored), logits.data(),
                                  /*all_logits=*/false, /*prompt=*/true));
    }
    for (int64_t p = first_scored; p < n_ctx - 1; p += model::kDefaultStepTokens) {
      const int64_t n = std::min<int64_t>(model::kDefaultStepTokens, n_ctx - 1 - p);
      RETURN_IF_ERROR(forward.Run(&state, std::span(window).subspan(p, n), logits.data(),
                                  /*all_logits=*/true, /*prompt=*/true));
      for (int64_t b = 0; b < n; ++b) {
        const int32_t target = tokens[start + p + b + 1];
        const double nll = TokenNll(&logits[b * n_vocab], n_vocab, target);
        result.nll_sum += nll;
        result.nll2_sum += nll * nll;
        ++result.n_scored;
      }
    }
    // Only an observer wants the last token's products.
    if (options.observer != nullptr) {
      RETURN_IF_ERROR(forward.Run(&state, std::span(window).last(1), logits.data(),
                                  /*all_logits=*/false, /*prompt=*/true));
    }
    ++result.n_chunks;
    result.running_ppl.push_back(RunningPpl(result.nll_sum, result.n_scored));
    if (on_chunk) on_chunk(chunk + 1, result.running_ppl.back());
  }
  const double count = static_cast<double>(result.n_scored);
  const double mean = result.nll_sum / count;
  result.ppl = std::exp(mean);
  const double variance = result.nll2_sum / count - mean * mean;
  if (result.n_scored > 1 && variance > 0) {
    result.ppl_error = std::sqrt(variance / (count - 1)) * result.ppl;
  }
  return result;
}

absl::StatusOr<Evaluation> LoadEvaluation(storage::Env* env, const std::string& model_path,
                                          const std::string& text_path,
                                          const PerplexityOptions& options) {
  if (!env->FileExists(text_path)) {
    return absl::NotFoundError(
        absl::StrCat(text_path, ": no such file; pass the text to evaluate as a file"));
  }
  ASSIGN_OR_RETURN(std::string text, storage::ReadFileToString(env, text_path));
  // As llama.cpp's -f: one trailing newline is not part of the text.
  if (!text.empty() && text.back() == '\n') text.pop_back();

  Evaluation eval;
  ASSIGN_OR_RETURN(eval.gguf, storage::GgufFile::Open(env, model_path));
  ASSIGN_OR_RETURN(eval.model, model::Model::Create(*eval.gguf));
  ASSIGN_OR_RETURN(text::Vocab vocab, text::VocabFromGguf(*eval.gguf));
  ASSIGN_OR_RETURN(std::unique_ptr<text::Tokenizer> tokenizer,
                   text::Tokenizer::Create(std::move(vocab)));
  if (tokenizer->add_eos()) {
    // llama.cpp asserts on these too: an EOS at the end of the text would
    // be scored as if it were part of it.
    return absl::UnimplementedError(
        absl::StrCat(model_path,
                     ": the vocabulary adds EOS after every text, which perplexity does not "
                     "support (nor does llama-perplexity)"));
  }
  const std::vector<text::TokenId> tokens =
      tokenizer->Encode(text, /*add_special=*/true, /*parse_special=*/false);
  eval.tokens.assign(tokens.begin(), tokens.end());
  RETURN_IF_ERROR(CheckInput(static_cast<int64_t>(eval.tokens.size()), options));
  eval.bos = tokenizer->add_bos() ? tokenizer->bos() : -1;
  const model::HParams& hp = eval.model->hparams();
  if (options.n_ctx > hp.n_ctx_train && hp.n_ctx_train > 0) {
    WLOG(WARNING) << "--ctx " << options.n_ctx << " is beyond the model's trained context of "
                  << hp.n_ctx_train;
  }

  ASSIGN_OR_RETURN(std::unique_ptr<storage::RandomAccessFile> file,
                   storage::OpenModelFile(env, *eval.gguf));
  ASSIGN_OR_RETURN(eval.store,
                   cache::ResidentChunkStore::Load(env, *file, eval.model->chunks(), {}));
  return eval;
}

absl::StatusOr<PerplexityResult> PerplexityOfFile(storage::Env* env, const std::string& model_path,
                                                  const std::string& text_path,
                                                  const PerplexityOptions& options,
                                                  const ChunkCallback& on_chunk) {
  ASSIGN_OR_RETURN(Evaluation eval, LoadEvaluation(env, model_path, text_path, options));
  int threads = options.threads;
  if (threads <= 0) threads = kernels::ThreadPool::DefaultThreads();
  kernels::ThreadPool pool(threads);
  return ComputePerplexity(*eval.model, eval.store.get(), &pool, eval.tokens, eval.bos, options,
                           on_chunk);
}

namespace {

int RunKlDivergence(const std::string& base_path, const std::string& model_path,
                    const std::string& text_path, const PerplexityOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  storage::Env* env = storage::Env::Default();
  absl::StatusOr<Evaluation> base = LoadEvaluation(env, base_path, text_path, options);
  absl::StatusOr<Evaluation> model =
      base.ok() ? LoadEvaluation(env, model_path, text_path, options) : base.status();
  if (!model.ok()) {
    std::cerr << "wasted perplexity: " << model.status().message() << "\n";
    return 1;
  }
  kernels::ThreadPool pool(options.threads > 0 ? options.threads
                                               : kernels::ThreadPool::DefaultThreads());
  bool printed = false;
  absl::StatusOr<KlDivergenceResult> kl =
      ComputeKlDivergence(*base, *model, &pool, options, [&printed](int64_t chunk, double mean) {
        std::cout << absl::StrFormat("[%d]%.6f,", chunk, mean) << std::flush;
        printed = true;
      });
  if (printed) std::cout << "\n";
  if (!kl.ok()) {
    std::cerr << "wasted perplexity: " << kl.status().message() << "\n";
    return 1;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << absl::StrFormat("Final estimate: PPL = %.4f (base %.4f)\n", kl->ppl, kl->base_ppl);
  std::cout << absl::StrFormat("Mean KLD: %.6f +/- %.6f, max %.6f; same top token %.2f%%\n",
                               kl->kl_mean, kl->kl_error, kl->kl_max, 100 * kl->top1_agree);
  std::cerr << absl::StrFormat("%d chunks of %d, %d positions scored, %.1f s\n", kl->n_chunks,
                               options.n_ctx, kl->n_scored, seconds);
  return 0;
}

}  // namespace

int RunPerplexity(const std::vector<std::string>& args) {
  constexpr char kUsage[] =
      "usage: wasted perplexity MODEL.gguf TEXT_FILE [--ctx N] [--stride S] [--threads N]\n"
      "                         [--max-chunks K] [--kv f16|f32] [--kl-base BASE.gguf]\n"
      "  --ctx N         tokens per chunk (default 512)\n"
      "  --stride S      sliding windows every S tokens, scoring their last S (default: --ctx,\n"
      "                  non-overlapping chunks scoring their second half)\n"
      "  --max-chunks K  evaluate at most K chunks\n"
      "  --kv TYPE       KV cache type (default f16, as llama.cpp)\n"
      "  --kl-base BASE  also the KL divergence of MODEL's token distributions from BASE's\n"
      "                  (the model it was quantized from) on the scored positions\n";
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(
      args,
      {{"ctx"}, {"stride"}, {"threads"}, {"max-chunks"}, {"kv"}, {"kl-base"}, {"help", false}});
  if (!parsed.ok()) {
    std::cerr << "wasted perplexity: " << parsed.status().message() << "\n" << kUsage;
    return 2;
  }
  if (parsed->Has("help")) {
    std::cout << kUsage;
    return 0;
  }
  if (parsed->positional().size() != 2) {
    std::cerr << "wasted perplexity: need MODEL.gguf and TEXT_FILE\n" << kUsage;
    return 2;
  }
  PerplexityOptions options;
  absl::Status flags_status;
  auto get_int = [&](const char* name, int64_t fallback) {
    absl::StatusOr<int64_t> v = parsed->GetInt(name, fallback);
    if (!v.ok()) flags_status.Update(v.status());
    return v.value_or(fallback);
  };
  options.n_ctx = get_int("ctx", options.n_ctx);
  options.stride = get_int("stride", 0);
  options.threads = static_cast<int>(get_int("threads", 0));
  options.max_chunks = get_int("max-chunks", -1);
  const std::string kv = parsed->GetOr("kv", "f16");
  if (kv == "f32") {
    options.kv_type = kernels::ops::KvType::kF32;
  } else if (kv != "f16") {
    flags_status.Update(absl::InvalidArgumentError("--kv: use f16 or f32"));
  }
  if (!flags_status.ok()) {
    std::cerr << "wasted perplexity: " << flags_status.message() << "\n";
    return 2;
  }

  if (parsed->Has("kl-base")) {
    return RunKlDivergence(*parsed->Get("kl-base"), parsed->positional()[0],
                           parsed->positional()[1], options);
  }
  const auto start = std::chrono::steady_clock::now();
  bool printed = false;
  absl::StatusOr<PerplexityResult> result =
      PerplexityOfFile(storage::Env::Default(), parsed->positional()[0], parsed->positional()[1],
                       options, [&printed](int64_t chunk, double ppl) {
                         std::cout << absl::StrFormat("[%d]%.4f,", chunk, ppl) << std::flush;
                         printed = true;
                       });
  if (printed) std::cout << "\n";
  if (!result.ok()) {
    std::cerr << "wasted perplexity: " << result.status().message() << "\n";
    return 1;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << absl::StrFormat("Final estimate: PPL = %.4f +/- %.5f\n", result->ppl,
                               result->ppl_error);
  std::cerr << absl::StrFormat("%d tokens, %d chunks of %d, %d tokens scored, %.1f s\n",
                               result->n_tokens, result->n_chunks, options.n_ctx, result->n_scored,
                               seconds);
  return 0;
}

}  // namespace waste::quality
