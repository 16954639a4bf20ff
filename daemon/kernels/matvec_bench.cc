// Weight-streaming throughput of MatVec against this machine's memory read
// bandwidth, measured in the same run.
//
//   bazel build --config=opt //daemon/kernels:matvec_bench
//   bazel-bin/daemon/kernels/matvec_bench [--gib=1] [--reps=5] [--batches=1,4,8,16,64]
//   WASTE_KERNELS_ISA=avx2 bazel-bin/...   (cap the kernel family)
//   bazel-bin/... --cache_kib=256        (in-cache: compute cost per core, timed
//                                         in thread CPU time)
//   bazel-bin/... --cache_kib=262144 --cpu_threads=2   (streaming from DRAM,
//                                         timed in CPU time: for A/B on a busy machine)
//   bazel-bin/... --interleave            (in the layout resident weights take)
//
// For each type a ~1 GiB matrix (4096 columns; far larger than the caches,
// so every call streams from DRAM, as decode does) is multiplied by one
// vector with 1 and 2 threads; GB/s counts weight bytes consumed per second
// (best of --reps). The machine figure is an AVX sum over 2 GiB with the same
// thread count. With --batches, each batch size runs in turn and the rows add
// the weight-bytes-equivalent rate (batch x GB/s: what batch-1 calls would
// have to stream to do the same work) and the time per call against batch 1.
#include <immintrin.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "daemon/kernels/cpu_features.h"
#include "daemon/kernels/matvec.h"
#include "daemon/kernels/quant_blocks.h"
#include "daemon/kernels/quantize.h"
#include "daemon/kernels/thread_pool.h"

ABSL_FLAG(double, gib, 1.0, "weight matrix size per type, GiB");
ABSL_FLAG(int, reps, 5, "timed repetitions (best is reported)");
ABSL_FLAG(int64_t, cols, 4096, "columns of the weight matrix");
ABSL_FLAG(int, batch, 1, "activation vectors per call (MatMul)");
ABSL_FLAG(std::string, batches, "",
          "comma-separated batch sizes to run in turn (e.g. 1,4,8,16,64); overrides --batch. "
          "Each row then also shows the weight-bytes-equivalent rate (batch x weight bytes / "
          "time) and the time per call relative to batch 1");
ABSL_FLAG(int, cache_kib, 0,
          "if > 0: a matrix of this many KiB, called repeatedly on one thread, so that "
          "the weights stay in cache and the figure is the kernel's compute cost");
ABSL_FLAG(std::string, types, "", "comma-separated types to run (e.g. Q4_0,Q4_K); empty: all");
ABSL_FLAG(int, calls, 0, "in-cache mode: calls per repetition (0: about 50 ms worth)");
ABSL_FLAG(
    bool, interleave, false,
    "weights in the layout resident weights take on this ISA (ResidentLayoutFor: Q4_0 "
    "interleaved everywhere, Q8_0, Q4_K, IQ4_NL and IQ4_XS on the AVX2 families); the rest as "
    "GGUF has them");
ABSL_FLAG(bool, matrix, false,
          "ProductPath::kMatrix: the matrix unit (AMX) where this machine runs it and has a "
          "loop for the type (prefill's path); else the vector loops");
ABSL_FLAG(int, cpu_threads, 1,
          "in-cache mode: threads of the pool the calls run on; the time is the process's CPU "
          "time divided by this. With a --cache_kib far above the caches (e.g. 262144) the "
          "calls stream from DRAM, timed in CPU time, which a busy machine disturbs less than "
          "wall time (a thread's stalls on memory count; the time it is descheduled does not)");

namespace waste::kernels {
namespace {

ProductPath Path() {
  return absl::GetFlag(FLAGS_matrix) ? ProductPath::kMatrix : ProductPath::kVector;
}

const char* PathNote() {
  if (!absl::GetFlag(FLAGS_matrix)) return "";
  return MatrixUnitAvailable() ? " + matrix unit (AMX)" : " (no matrix unit here: vector loops)";
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// This thread's CPU time: the in-cache mode runs on one thread, and on a
// shared machine the time it spends descheduled is not the kernel's cost.
double ThreadCpuNow() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// The process's CPU time over all its threads.
double ProcessCpuNow() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Anonymous memory, huge-page backed where the kernel allows (as the daemon's
// pool is), touched so that page faults stay out of the timings.
struct Buffer {
  explicit Buffer(size_t n) : bytes(n) {
    data = static_cast<uint8_t*>(
        mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (data == MAP_FAILED) {
      std::perror("mmap");
      std::exit(1);
    }
    madvise(data, n, MADV_HUGEPAGE);
    std::memset(data, 1, n);
  }
  ~Buffer() { munmap(data, bytes); }
  uint8_t* data;
  size_t bytes;
};

// Sum of floats over [begin, end) of the buffer: 4 independent AVX adds per
// 128 bytes, far below what the core can do, so memory is the limit.
__attribute__((target("avx2"))) float SumRange(const uint8_t* p, int64_t begin, int64_t end) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = begin; i < end; i += 128) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(reinterpret_cast<const float*>(p + i)));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(reinterpret_cast<const float*>(p + i + 32)));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(reinterpret_cast<const float*>(p + i + 64)));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(reinterpret_cast<const float*>(p + i + 96)));
  }
  alignas(32) float out[8];
  _mm256_store_ps(out, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  return out[0] + out[7];
}

double MemoryReadGBps(const Buffer& buf, ThreadPool* pool, int reps) {
  const int64_t chunk = 1 << 20;  // 1 MiB units handed to threads.
  const int64_t chunks = buf.bytes / chunk;
  double best = 1e30;
  volatile float sink = 0;
  for (int r = 0; r < reps; ++r) {
    std::vector<float> partial(chunks);
    const double t0 = Now();
    pool->ParallelFor(chunks, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) partial[c] = SumRange(buf.data, c * chunk, (c + 1) * chunk);
    });
    best = std::min(best, Now() - t0);
    sink = sink + partial[0];
  }
  return chunks * chunk / best / 1e9;
}

double MatVecGBps(const WeightView& w, int batch, ThreadPool* pool, Scratch* scratch, int reps) {
  std::vector<float> x(w.cols * batch), y(w.rows * batch);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (float& v : x) v = normal(rng);
  double best = 1e30;
  for (int r = 0; r < reps + 1; ++r) {  // The first call warms up.
    const double t0 = Now();
    const absl::Status s =
        MatMul(w, x.data(), w.cols, batch, y.data(), w.rows, pool, scratch, Path());
    const double dt = Now() - t0;
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      std::exit(1);
    }
    if (r > 0) best = std::min(best, dt);
  }
  return w.rows * w.row_stride_bytes / best / 1e9;
}

// The weights of `type` for a matrix of about `bytes`: 64 distinct quantized
// rows, repeated (the contents do not change the work, and quantizing 1 GiB
// here would take longer than the benchmark).
WeightView MakeWeights(WeightType type, int64_t cols, int64_t bytes, std::unique_ptr<Buffer>* out) {
  const int64_t row_bytes = RowBytes(type, cols);
  const int64_t rows = std::max<int64_t>(1, bytes / row_bytes);
  auto w = std::make_unique<Buffer>(rows * row_bytes);
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> src(cols);
  for (int64_t r = 0; r < std::min<int64_t>(rows, 64); ++r) {
    for (float& v : src) v = normal(rng);
    QuantizeRow(type, src.data(), w->data + r * row_bytes, cols);
  }
  for (int64_t r = 64; r < rows; r += 64) {
    std::memcpy(w->data + r * row_bytes, w->data, std::min<int64_t>(64, rows - r) * row_bytes);
  }
  WeightView view = DenseWeightView(type, rows, cols, w->data);
  if (absl::GetFlag(FLAGS_interleave)) {
    view.layout = ResidentLayoutFor(type, cols, DetectIsa());
    if (view.layout != WeightLayout::kRows) InterleaveRows(type, rows, cols, w->data, view.layout);
  }
  *out = std::move(w);
  return view;
}

constexpr WeightType kBenchTypes[] = {
    WeightType::kQ4_0,    WeightType::kQ8_0,   WeightType::kQ4_K,   WeightType::kQ6_K,
    WeightType::kF16,     WeightType::kQ4_1,   WeightType::kQ5_0,   WeightType::kQ5_1,
    WeightType::kQ5_K,    WeightType::kBF16,   WeightType::kF32,    WeightType::kQ2_K,
    WeightType::kQ3_K,    WeightType::kIQ4_NL, WeightType::kIQ4_XS, WeightType::kIQ3_S,
    WeightType::kIQ3_XXS, WeightType::kIQ2_S,  WeightType::kIQ2_XS, WeightType::kIQ2_XXS,
    WeightType::kIQ1_M,   WeightType::kIQ1_S,  WeightType::kMXFP4};

std::vector<int> Batches() {
  std::vector<int> out;
  const std::string list = absl::GetFlag(FLAGS_batches);
  for (size_t pos = 0; pos < list.size();) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    out.push_back(std::atoi(list.substr(pos, comma - pos).c_str()));
    pos = comma + 1;
  }
  if (out.empty()) out.push_back(absl::GetFlag(FLAGS_batch));
  return out;
}

bool Selected(WeightType type) {
  const std::string list = "," + absl::GetFlag(FLAGS_types) + ",";
  return list == ",," ||
         list.find("," + std::string(GetWeightTypeInfo(type).name) + ",") != std::string::npos;
}

// Per-core compute throughput: weights in L2, one thread, many calls (best
// of --reps), so memory bandwidth is out of the picture.
int InCacheMain() {
  const int reps = absl::GetFlag(FLAGS_reps);
  const int64_t cols = absl::GetFlag(FLAGS_cols);
  const std::vector<int> batches = Batches();
  const int threads = std::max(1, absl::GetFlag(FLAGS_cpu_threads));
  ThreadPool pool(threads);
  ThreadPool* pool_or_null = threads > 1 ? &pool : nullptr;
  auto cpu_now = [&] { return threads > 1 ? ProcessCpuNow() / threads : ThreadCpuNow(); };
  std::printf("kernels: %s%s, cols %ld, in cache (%d KiB), %d thread(s), CPU time%s\n\n",
              std::string(IsaName(DetectIsa())).c_str(), PathNote(), cols,
              absl::GetFlag(FLAGS_cache_kib), threads,
              absl::GetFlag(FLAGS_interleave) ? ", interleaved" : "");
  std::printf("%-8s %5s %9s %14s %11s %10s %8s\n", "type", "batch", "GB/s", "ns/256 elems",
              "GB/s equiv", "us/call", "x batch1");
  for (WeightType type : kBenchTypes) {
    if (!Selected(type)) continue;
    std::unique_ptr<Buffer> buf;
    const WeightView w =
        MakeWeights(type, cols, int64_t{absl::GetFlag(FLAGS_cache_kib)} << 10, &buf);
    double first = 0;
    for (int batch : batches) {
      Scratch scratch(MatVecScratchBytes(type, cols, batch));
      std::vector<float> x(cols * batch), y(w.rows * batch);
      std::mt19937 rng(1);
      std::normal_distribution<float> normal;
      for (float& v : x) v = normal(rng);
      const int64_t bytes = w.rows * w.row_stride_bytes;
      int calls = absl::GetFlag(FLAGS_calls);
      if (calls <= 0) calls = std::max<int64_t>(1, int64_t{500'000'000} / bytes / batch);
      double best = 1e30;
      for (int r = 0; r < reps + 1; ++r) {
        const double t0 = cpu_now();
        for (int c = 0; c < calls; ++c) {
          const absl::Status s =
              MatMul(w, x.data(), cols, batch, y.data(), w.rows, pool_or_null, &scratch, Path());
          if (!s.ok()) {
            std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
            std::exit(1);
          }
        }
        if (r > 0) best = std::min(best, (cpu_now() - t0) / calls);
      }
      if (first == 0) first = best;
      std::printf("%-8s %5d %9.1f %14.2f %11.1f %10.1f %8.2f\n",
                  std::string(GetWeightTypeInfo(type).name).c_str(), batch, bytes / best / 1e9,
                  best * 1e9 / (w.rows * cols / 256.0), batch * bytes / best / 1e9, best * 1e6,
                  best / first);
      std::fflush(stdout);
    }
  }
  return 0;
}

int Main() {
  if (absl::GetFlag(FLAGS_cache_kib) > 0) return InCacheMain();
  const int reps = absl::GetFlag(FLAGS_reps);
  const int64_t cols = absl::GetFlag(FLAGS_cols);
  const std::vector<int> batches = Batches();
  std::printf("kernels: %s%s, cols %ld%s\n", std::string(IsaName(DetectIsa())).c_str(), PathNote(),
              cols, absl::GetFlag(FLAGS_interleave) ? ", interleaved" : "");
  ThreadPool pool1(1), pool2(2);
  ThreadPool* pools[2] = {&pool1, &pool2};
  double machine[2];
  {
    Buffer buf(size_t{2} << 30);
    for (int t = 0; t < 2; ++t) machine[t] = MemoryReadGBps(buf, pools[t], reps);
  }
  std::printf("memory read (AVX sum over 2 GiB): 1 thread %.1f GB/s, 2 threads %.1f GB/s\n\n",
              machine[0], machine[1]);
  std::printf("%-8s %5s %7s %9s %12s %7s %10s %11s %8s\n", "type", "batch", "threads", "GB/s",
              "machine GB/s", "ratio", "ms/call", "GB/s equiv", "x batch1");
  for (WeightType type : kBenchTypes) {
    if (!Selected(type)) continue;
    std::unique_ptr<Buffer> buf;
    const WeightView view =
        MakeWeights(type, cols, static_cast<int64_t>(absl::GetFlag(FLAGS_gib) * (1 << 30)), &buf);
    const int64_t rows = view.rows, row_bytes = view.row_stride_bytes;
    double first[2] = {0, 0};
    for (int batch : batches) {
      Scratch scratch(MatVecScratchBytes(type, cols, batch));
      for (int t = 0; t < 2; ++t) {
        const double gbps = MatVecGBps(view, batch, pools[t], &scratch, reps);
        const double ms = rows * row_bytes / gbps / 1e6;
        if (first[t] == 0) first[t] = ms;
        std::printf("%-8s %5d %7d %9.1f %12.1f %6.0f%% %10.2f %11.1f %8.2f\n",
                    std::string(GetWeightTypeInfo(type).name).c_str(), batch, t + 1, gbps,
                    machine[t], 100 * gbps / machine[t], ms, batch * gbps, ms / first[t]);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace waste::kernels

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return waste::kernels::Main();
}
