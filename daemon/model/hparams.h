// A model's hyperparameters, read from GGUF metadata as llama.cpp names the
// keys ("{arch}.embedding_length", "{arch}.attention.head_count", ...).
#ifndef WASTE_DAEMON_MODEL_HPARAMS_H_
#define WASTE_DAEMON_MODEL_HPARAMS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/kernels/ops/rope.h"
#include "storage/gguf.h"

namespace waste::model {

enum class Arch { kLlama, kQwen2, kQwen3 };

struct HParams {
  std::string arch_name;  // general.architecture
  Arch arch = Arch::kLlama;
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;  // attention.key_length, else n_embd / n_head.
  int64_t n_ff = 0;
  int64_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  kernels::ops::RopeParams rope;  // freq_factors is bound by the model at load.

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
};

// Reads and checks the hyperparameters; an unsupported architecture or a
// missing/inconsistent key is an error naming the key.
absl::StatusOr<HParams> ReadHParams(const storage::GgufFile& gguf);

}  // namespace waste::model

#endif  // WASTE_DAEMON_MODEL_HPARAMS_H_
