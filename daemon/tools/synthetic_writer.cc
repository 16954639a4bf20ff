// WriteSyntheticModel (declared in synthetic_model.h): streams a ModelSpec
// into a GGUF file with seeded random weights.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "daemon/kernels/quantize.h"
#include "daemon/tools/synthetic_model.h"
#include "daemon/tools/synthetic_tokenizer.h"
#include "storage/gguf_writer.h"

namespace waste::tools {
namespace {

using storage::GgmlType;

// Output bytes per chunk: large enough to amortize a write, small enough
// that (2 * threads + 2) chunks in flight stay a few tens of MB.
constexpr uint64_t kChunkBytes = 4 << 20;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// wyrand: a fast 64-bit generator, one 64x64->128 multiply per draw.
uint64_t WyRand(uint64_t* state) {
  *state += 0xA0761D6478BD642Full;
  const __uint128_t m = static_cast<__uint128_t>(*state) * (*state ^ 0xE7037ED1A0B428DBull);
  return static_cast<uint64_t>(m >> 64) ^ static_cast<uint64_t>(m);
}

// Random weights without running a quantizer per weight: the quantizers are
// reference code at ~10 ns per element, which would cap a 30 GB model at
// ~100 MB/s. Instead each (type, scale) gets a pool of kPoolUnits encoded
// units (one ggml block, or 32 elements of a plain type) drawn from
// normal(0, scale) and quantized once; a row is a sequence of units picked
// at random from the pool. Values keep the distribution (and quantization
// error) of real quantized normals, rows are all different, and a row costs
// one memcpy per block.
constexpr int kPoolBits = 12;
constexpr int kPoolUnits = 1 << kPoolBits;

class BlockPool {
 public:
  BlockPool(GgmlType type, float scale, uint64_t seed) {
    const int64_t block = storage::GetGgmlTypeTraits(type).block_size;
    unit_elems_ = block > 1 ? block : 32;
    unit_bytes_ = *storage::GgmlRowSize(type, unit_elems_);
    std::vector<float> values(unit_elems_ * kPoolUnits);
    uint64_t state = SplitMix64(
        seed ^ SplitMix64(static_cast<uint64_t>(type) << 32 | std::bit_cast<uint32_t>(scale)));
    for (size_t i = 0; i < values.size(); i += 2) {  // Box-Muller.
      const double u1 = (static_cast<double>(WyRand(&state) >> 11) + 1) * 0x1.0p-53;
      const double u2 = static_cast<double>(WyRand(&state) >> 11) * 0x1.0p-53;
      const double r = std::sqrt(-2 * std::log(u1)) * scale;
      values[i] = static_cast<float>(r * std::cos(2 * M_PI * u2));
      values[i + 1] = static_cast<float>(r * std::sin(2 * M_PI * u2));
    }
    bytes_.resize(unit_bytes_ * kPoolUnits);
    kernels::QuantizeRow(static_cast<kernels::WeightType>(type), values.data(), bytes_.data(),
                         static_cast<int64_t>(values.size()));
  }

  // Writes one row of `row_bytes` (a row of ne0 elements) from the stream
  // keyed by (seed, tensor, row). A trailing partial unit (plain types
  // only, whose rows need not be whole units) takes a unit's prefix.
  void FillRow(uint64_t seed, uint64_t tensor, uint64_t row, char* dst, uint64_t row_bytes) const {
    uint64_t state = SplitMix64(seed ^ SplitMix64(tensor * 0x100000001B3ull + row));
    uint64_t bits = 0;
    int left = 0;
    for (uint64_t at = 0; at < row_bytes; at += unit_bytes_) {
      if (left == 0) {
        bits = WyRand(&state);
        left = 64 / kPoolBits;
      }
      const uint64_t unit = bits & (kPoolUnits - 1);
      bits >>= kPoolBits;
      --left;
      std::memcpy(dst + at, bytes_.data() + unit * unit_bytes_,
                  std::min(unit_bytes_, row_bytes - at));
    }
  }

 private:
  int64_t unit_elems_ = 0;
  uint64_t unit_bytes_ = 0;
  std::string bytes_;
};

// One pool per distinct (type, scale) of the spec's random tensors;
// result[t] is tensor t's pool (null for ones-initialized tensors).
std::vector<std::shared_ptr<const BlockPool>> MakePools(const ModelSpec& spec, uint64_t seed) {
  std::map<std::pair<GgmlType, float>, std::shared_ptr<const BlockPool>> pools;
  std::vector<std::shared_ptr<const BlockPool>> result;
  for (const TensorSpec& tensor : spec.tensors) {
    if (tensor.init != WeightInit::kNormal) {
      result.push_back(nullptr);
      continue;
    }
    auto& pool = pools[{tensor.type, tensor.scale}];
    if (pool == nullptr) pool = std::make_shared<BlockPool>(tensor.type, tensor.scale, seed);
    result.push_back(pool);
  }
  return result;
}

// A run of rows of one tensor, generated and written as a unit.
struct Chunk {
  size_t tensor = 0;
  int64_t first_row = 0;
  int64_t rows = 0;
};

std::vector<Chunk> PlanChunks(const ModelSpec& spec) {
  std::vector<Chunk> chunks;
  for (size_t t = 0; t < spec.tensors.size(); ++t) {
    const TensorSpec& tensor = spec.tensors[t];
    const uint64_t row_bytes = *storage::GgmlRowSize(tensor.type, tensor.shape[0]);
    int64_t rows = 1;
    for (size_t d = 1; d < tensor.shape.size(); ++d) rows *= tensor.shape[d];
    const int64_t per_chunk = std::max<int64_t>(1, kChunkBytes / row_bytes);
    for (int64_t r = 0; r < rows; r += per_chunk) {
      chunks.push_back({t, r, std::min(per_chunk, rows - r)});
    }
  }
  return chunks;
}

// Generates chunks on worker threads into a ring of slots and hands them to
// the caller's thread in order. Slot c % slots holds chunk c; a worker may
// fill chunk c once chunk c - slots has been consumed.
class ChunkPipeline {
 public:
  ChunkPipeline(const ModelSpec& spec, uint64_t seed, std::vector<Chunk> chunks, int workers)
      : spec_(spec),
        seed_(seed),
        pools_(MakePools(spec, seed)),
        chunks_(std::move(chunks)),
        slots_(2 * workers + 2) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { Work(); });
  }
  ~ChunkPipeline() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  size_t size() const { return chunks_.size(); }
  const Chunk& chunk(size_t c) const { return chunks_[c]; }

  // Blocks until chunk c (the next not consumed) is ready; its bytes stay
  // valid until Consumed(c).
  std::string_view Wait(size_t c) {
    Slot& slot = slots_[c % slots_.size()];
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return slot.ready_chunk == static_cast<int64_t>(c); });
    return std::string_view(slot.bytes.data(), slot.size);
  }
  void Consumed(size_t c) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      consumed_ = c + 1;
    }
    cv_.notify_all();
  }

 private:
  struct Slot {
    std::vector<char> bytes;
    size_t size = 0;
    int64_t ready_chunk = -1;
  };

  void Work() {
    for (;;) {
      const size_t c = next_.fetch_add(1);
      if (c >= chunks_.size()) return;
      Slot& slot = slots_[c % slots_.size()];
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return cancelled_ || c < consumed_ + slots_.size(); });
        if (cancelled_) return;
      }
      Fill(chunks_[c], &slot);
      {
        std::lock_guard<std::mutex> lock(mu_);
        slot.ready_chunk = static_cast<int64_t>(c);
      }
      cv_.notify_all();
    }
  }

  void Fill(const Chunk& chunk, Slot* slot) {
    const TensorSpec& tensor = spec_.tensors[chunk.tensor];
    const int64_t ne0 = tensor.shape[0];
    const uint64_t row_bytes = *storage::GgmlRowSize(tensor.type, ne0);
    slot->size = row_bytes * chunk.rows;
    if (slot->bytes.size() < slot->size) slot->bytes.resize(slot->size);
    const BlockPool* pool = pools_[chunk.tensor].get();
    if (pool == nullptr) {  // kOnes: F32 norm weights.
      WCHECK(tensor.type == GgmlType::kF32) << tensor.name;
      const float one = 1.0f;
      for (uint64_t at = 0; at < slot->size; at += sizeof(float)) {
        std::memcpy(slot->bytes.data() + at, &one, sizeof(float));
      }
      return;
    }
    for (int64_t r = 0; r < chunk.rows; ++r) {
      pool->FillRow(seed_, chunk.tensor, chunk.first_row + r, slot->bytes.data() + r * row_bytes,
                    row_bytes);
    }
  }

  const ModelSpec& spec_;
  const uint64_t seed_;
  const std::vector<std::shared_ptr<const BlockPool>> pools_;
  const std::vector<Chunk> chunks_;
  std::vector<Slot> slots_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> next_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  size_t consumed_ = 0;     // Guarded by mu_.
  bool cancelled_ = false;  // Guarded by mu_.
};

absl::Status WriteModel(const ModelSpec& spec, const TokenizerMetadata& tokenizer, uint64_t seed,
                        int threads, storage::WritableFile* file) {
  storage::WritableFileSink sink(file);
  storage::GgufWriter writer(&sink);
  for (const auto& [key, value] : spec.metadata) RETURN_IF_ERROR(writer.AddMetadata(key, value));
  for (const auto& [key, value] : tokenizer.keys) RETURN_IF_ERROR(writer.AddMetadata(key, value));
  for (const TensorSpec& tensor : spec.tensors) {
    RETURN_IF_ERROR(writer.AddTensor(tensor.name, tensor.type, tensor.shape).status());
  }
  RETURN_IF_ERROR(writer.WriteHeader());
  ChunkPipeline pipeline(spec, seed, PlanChunks(spec), threads);
  for (size_t c = 0; c < pipeline.size(); ++c) {
    std::string_view bytes = pipeline.Wait(c);
    RETURN_IF_ERROR(writer.AppendTensorData(spec.tensors[pipeline.chunk(c).tensor].name, bytes));
    pipeline.Consumed(c);
  }
  return writer.Finish();
}

}  // namespace

absl::StatusOr<MkModelResult> WriteSyntheticModel(const MkModelOptions& options,
                                                  storage::Env* env) {
  TokenizerMetadata tokenizer;
  if (!options.tokenizer_from.empty()) {
    ASSIGN_OR_RETURN(tokenizer, CopyTokenizer(env, options.tokenizer_from));
  } else {
    ASSIGN_OR_RETURN(tokenizer,
                     ByteLevelTokenizer(options.vocab > 0 ? options.vocab : MinByteLevelVocab()));
  }
  if (!options.chat_template.empty()) {
    std::erase_if(tokenizer.keys,
                  [](const auto& key) { return key.first == "tokenizer.chat_template"; });
    tokenizer.keys.emplace_back("tokenizer.chat_template",
                                storage::GgufValue::String(options.chat_template));
  }
  ASSIGN_OR_RETURN(MkModelOptions resolved, ResolveOptions(options, tokenizer.vocab));
  const ModelSpec spec = BuildModelSpec(resolved);

  int threads = resolved.threads;
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  const std::string tmp = resolved.out + ".mkmodel-tmp";
  {
    ASSIGN_OR_RETURN(std::unique_ptr<storage::WritableFile> file, env->NewWritableFile(tmp));
    absl::Status status = WriteModel(spec, tokenizer, resolved.seed, threads, file.get());
    if (status.ok()) status = file->Sync();
    if (status.ok()) status = file->Close();
    if (!status.ok()) {
      file.reset();
      env->DeleteFile(tmp).IgnoreError();
      return absl::Status(status.code(),
                          absl::StrCat("writing ", resolved.out, ": ", status.message()));
    }
  }
  RETURN_IF_ERROR(env->RenameFile(tmp, resolved.out));

  MkModelResult result;
  result.arch = spec.arch;
  result.tensors = static_cast<int64_t>(spec.tensors.size());
  for (const TensorSpec& t : spec.tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    result.params += n;
  }
  result.vocab = resolved.vocab;
  ASSIGN_OR_RETURN(result.file_bytes, env->GetFileSize(resolved.out));
  return result;
}

}  // namespace waste::tools
