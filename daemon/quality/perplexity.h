// `wasted perplexity MODEL.gguf TEXT_FILE [--ctx N] [--stride S] ...`:
// perplexity of a model on a text, computed the way llama.cpp's
// llama-perplexity (tools/perplexity/perplexity.cpp) computes it, so that
// the numbers of the two programs are comparable for the same model, text
// and context:
//
//   - The file is read whole; one trailing '\n' is dropped (as llama.cpp's
//     -f does). It is tokenized in one piece with the vocabulary's special
//     tokens (a leading BOS when the model asks for one); special-token text
//     in the file is not parsed.
//   - At least 2 * n_ctx tokens are needed (llama.cpp's rule), else
//     INVALID_ARGUMENT saying how many there are.
//   - Default (stride == n_ctx): the tokens are cut into floor(N / n_ctx)
//     non-overlapping chunks of n_ctx; each is evaluated from an empty KV
//     cache, with its first token replaced by BOS when the model adds BOS.
//     Scored: the logits at positions n_ctx/2 .. n_ctx-2, predicting the
//     tokens at n_ctx/2+1 .. n_ctx-1 (n_ctx - n_ctx/2 - 1 tokens a chunk):
//     every scored token has at least half a context before it.
//   - stride < n_ctx (llama.cpp's --ppl-stride): windows of n_ctx tokens
//     starting every `stride` tokens, ceil((N - n_ctx) / stride) of them;
//     each scores its last `stride` tokens (logits at n_ctx-stride-1 ..
//     n_ctx-2). The windows run on the tokens as they are: llama.cpp's
//     strided path swaps BOS in only after the batch is decoded, so in
//     effect it never replaces the first token, and neither does this.
//   - The NLL of a token is log(sum(exp(logit - max))) + max - logit[tok]
//     (sum in double). PPL = exp(mean NLL); its error is
//     PPL * sqrt((mean(NLL^2) - mean(NLL)^2) / (count - 1)), as llama.cpp's
//     "Final estimate: PPL = X +/- E".
//   - max_chunks caps the number of chunks (llama.cpp's --chunks).
//   - The KV cache is F16 by default, llama.cpp's default cache type.
//
// Logits are computed in pieces of kDefaultStepTokens positions and scored at
// once, so memory is one piece of logits, not n_ctx * n_vocab floats.
#ifndef WASTE_DAEMON_QUALITY_PERPLEXITY_H_
#define WASTE_DAEMON_QUALITY_PERPLEXITY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/cache/chunk_store.h"
#include "daemon/kernels/ops/attention.h"
#include "daemon/kernels/thread_pool.h"
#include "daemon/model/forward.h"
#include "daemon/model/model.h"
#include "storage/env.h"
#include "storage/gguf.h"

namespace waste::quality {

struct PerplexityOptions {
  int64_t n_ctx = 512;      // llama.cpp's classic perplexity context.
  int64_t stride = 0;       // 0 or n_ctx: non-overlapping chunks.
  int64_t max_chunks = -1;  // < 0: all.
  int threads = 0;          // 0: the machine's cores.
  kernels::ops::KvType kv_type = kernels::ops::KvType::kF16;
  // Sees the input of every weight product (wasted imatrix). With one, each
  // chunk also runs its last token, whose logits are never scored, so the
  // observer sees all n_ctx tokens of every chunk, as llama-imatrix
  // evaluates them. Not owned.
  model::ProductObserver* observer = nullptr;
};

struct PerplexityResult {
  int64_t n_tokens = 0;  // Of the whole text.
  int64_t n_chunks = 0;  // Evaluated.
  int64_t n_scored = 0;  // Tokens whose NLL was summed.
  double nll_sum = 0;
  double nll2_sum = 0;
  double ppl = 0;
  double ppl_error = 0;  // 0 when there are too few tokens to tell.
  // PPL after each chunk (llama.cpp's "[1]12.34,[2]...").
  std::vector<double> running_ppl;
};

// Called after each chunk with its 1-based index and the running PPL.
using ChunkCallback = std::function<void(int64_t chunk, double running_ppl)>;

// Perplexity of `tokens` (already tokenized, BOS included as the model
// wants it). `bos` is the id to put at the start of each chunk, or -1 to
// leave chunks as they are. `model` is evaluated on `store` with `pool`;
// none is owned. INVALID_ARGUMENT for bad options or too few tokens;
// forward-pass errors are returned as they are.
absl::StatusOr<PerplexityResult> ComputePerplexity(const model::Model& model,
                                                   cache::ChunkStore* store,
                                                   kernels::ThreadPool* pool,
                                                   std::span<const int32_t> tokens, int32_t bos,
                                                   const PerplexityOptions& options,
                                                   const ChunkCallback& on_chunk = nullptr);

// A model loaded fully resident with a text tokenized for it, as
// perplexity and imatrix evaluate them.
struct Evaluation {
  std::unique_ptr<storage::GgufFile> gguf;
  std::unique_ptr<model::Model> model;
  std::unique_ptr<cache::ChunkStore> store;
  std::vector<int32_t> tokens;
  int32_t bos = -1;  // Put at the start of each chunk, or -1.
};

// Reads the text at `text_path` (one trailing newline dropped), loads the
// model at `model_path` and tokenizes the text as described above.
// NOT_FOUND for a missing text, INVALID_ARGUMENT when it is too short for
// `options`, the loader's errors otherwise.
absl::StatusOr<Evaluation> LoadEvaluation(storage::Env* env, const std::string& model_path,
                                          const std::string& text_path,
                                          const PerplexityOptions& options);

// Loads the model at `model_path` (fully resident), tokenizes the text at
// `text_path` as described above and computes its perplexity.
absl::StatusOr<PerplexityResult> PerplexityOfFile(storage::Env* env, const std::string& model_path,
                                                  const std::string& text_path,
                                                  const PerplexityOptions& options,
                                                  const ChunkCallback& on_chunk = nullptr);

// `wasted perplexity`: prints the running PPL per chunk and the final
// estimate; returns the process exit code (0, 1 for a failed run, 2 for
// bad usage).
int RunPerplexity(const std::vector<std::string>& args);

}  // namespace waste::quality

#endif  // WASTE_DAEMON_QUALITY_PERPLEXITY_H_
