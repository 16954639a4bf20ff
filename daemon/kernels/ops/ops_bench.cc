// ops_bench: time per call of each op on every ISA this CPU has.
//
//   bazel run -c opt //daemon/kernels/ops:ops_bench
//
// Attention is the decode case that dominates long contexts: one query token
// over 2048 cached positions, 32 heads x 128, f16 KV, with 8 KV heads (GQA,
// llama-3-8B shape) and 32 (MHA, llama-2-7B shape), on 1 and 2 threads. Its
// line also gives the K+V bytes streamed per second, to compare with the
// machine's memory bandwidth (MACHINE.md: ~29 GB/s one thread).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "daemon/kernels/ops/attention.h"
#include "daemon/kernels/ops/fp16.h"
#include "daemon/kernels/ops/ops.h"
#include "daemon/kernels/ops/rope.h"

namespace waste::kernels::ops {
namespace {

std::vector<float> Filled(int64_t n, float scale) {
  std::vector<float> v(n);
  uint32_t s = 12345;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = scale * (static_cast<float>(s >> 8) / 16777216.0f - 0.5f);
  }
  return v;
}

// Mean seconds per call over enough calls to fill ~0.3 s, after a warm-up.
double TimeIt(const std::function<void()>& fn) {
  using Clock = std::chrono::steady_clock;
  fn();
  int64_t iters = 1;
  for (;;) {
    const auto start = Clock::now();
    for (int64_t i = 0; i < iters; ++i) fn();
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (s > 0.3) return s / iters;
    iters *= s < 0.03 ? 10 : 2;
  }
}

const char* g_filter = nullptr;  // argv[1]: run only ops whose name contains it.

bool Selected(const char* op) {
  return g_filter == nullptr || std::strstr(op, g_filter) != nullptr;
}

void Report(const char* op, Isa isa, double seconds, const char* extra = "") {
  std::printf("%-34s %-7s %10.2f us %s\n", op, IsaName(isa), seconds * 1e6, extra);
}

// Two-thread split for attention (the kernels thread pool will replace it).
void TwoThreadFor(int64_t n, absl::FunctionRef<void(int64_t, int64_t)> body) {
  const int64_t mid = n / 2;
  std::thread t([&] { body(0, mid); });
  body(mid, n);
  t.join();
}

void BenchAttention(Isa isa, int n_kv_head, bool two_threads) {
  char op[64];
  std::snprintf(op, sizeof op, "attention 2048x32x128 kv%d %dt", n_kv_head, two_threads ? 2 : 1);
  if (!Selected(op)) return;
  const int n_head = 32, head_dim = 128;
  const int64_t n_ctx = 2048;
  const int64_t bytes = KvCacheBytes(KvType::kF16, n_ctx, n_kv_head, head_dim);
  std::vector<char> k(bytes), v(bytes);
  KvCacheLayer cache{KvType::kF16, k.data(), v.data(), n_ctx, n_kv_head, head_dim};
  const auto rows = Filled(n_ctx * n_kv_head * head_dim, 2.0f);
  KvStore(cache, 0, n_ctx, rows.data(), rows.data());
  AttentionParams p{n_head, n_kv_head, head_dim};
  const auto q = Filled(n_head * head_dim, 4.0f);
  std::vector<float> out(q.size()), scratch(AttentionScratchFloats(p));
  const double s = TimeIt([&] {
    if (two_threads) {
      Attention(p, cache, q.data(), 1, n_ctx - 1, out.data(), scratch.data(), scratch.size(),
                TwoThreadFor, isa);
    } else {
      Attention(p, cache, q.data(), 1, n_ctx - 1, out.data(), scratch.data(), scratch.size(),
                SerialFor, isa);
    }
  });
  char extra[64];
  std::snprintf(extra, sizeof extra, "(%.1f GB/s of f16 K+V)", 2.0 * bytes / s / 1e9);
  Report(op, isa, s, extra);
}

void Bench(const char* op, Isa isa, const std::function<void()>& fn) {
  if (Selected(op)) Report(op, isa, TimeIt(fn));
}

void Run() {
  const int64_t n = 4096;
  const auto x = Filled(n, 4.0f);
  const auto w = Filled(n, 2.0f);
  const auto ffn = Filled(14336, 4.0f);
  std::vector<float> y(14336);
  RopeParams rope;
  rope.n_rot = 128;
  rope.freq_base = 500000.0f;
  RopeParams neox = rope;
  neox.mode = RopeMode::kNeox;
  std::vector<float> table(RopeTableFloats(rope));
  std::vector<Half> halves(n);

  std::printf("%-34s %-7s %13s\n", "op", "isa", "time/call");
  for (Isa isa : AvailableIsas()) {
    Bench("rmsnorm 4096", isa, [&] { RmsNorm(x.data(), w.data(), n, 1e-5f, y.data(), isa); });
    Bench("rope table init (n_rot 128)", isa, [&] { RopeTableInit(rope, 1234, table.data()); });
    Bench("rope apply 32x128 normal", isa,
          [&] { RopeApply(rope, table.data(), 32, 128, x.data(), y.data(), isa); });
    Bench("rope apply 32x128 neox", isa,
          [&] { RopeApply(neox, table.data(), 32, 128, x.data(), y.data(), isa); });
    Bench("softmax 4096", isa, [&] {
      y.assign(x.begin(), x.end());
      Softmax(y.data(), n, isa);
    });
    Bench("swiglu 14336", isa, [&] { SwiGlu(ffn.data(), ffn.data(), 14336, y.data(), isa); });
    Bench("gelu 14336", isa, [&] { Gelu(ffn.data(), 14336, y.data(), isa); });
    Bench("add 4096", isa, [&] { Add(x.data(), w.data(), n, y.data(), isa); });
    Bench("f32->f16 4096", isa, [&] { FloatToHalfRow(x.data(), n, halves.data(), isa); });
    for (int n_kv_head : {8, 32}) {
      for (bool two : {false, true}) BenchAttention(isa, n_kv_head, two);
    }
  }
}

}  // namespace
}  // namespace waste::kernels::ops

int main(int argc, char** argv) {
  if (argc > 1) waste::kernels::ops::g_filter = argv[1];
  waste::kernels::ops::Run();
  return 0;
}
