#include "daemon/bench/compute_rate.h"

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "daemon/kernels/cpu_features.h"
#include "daemon/kernels/quant_blocks.h"
#include "daemon/kernels/quantize.h"

namespace waste::bench {
namespace {

// A matrix multiplied through by products (not a norm, bias or other
// vector the forward pass reads element by element).
bool IsMatrix(const model::TensorRef& t) { return t.present && t.rows > 1; }

// One thread's probe matrix: distinct quantized rows of normal values, in
// the resident layout where asked, and the vector and scratch its calls use.
struct ProbeMatrix {
  std::vector<uint8_t> bytes;
  kernels::WeightView view;
  std::vector<float> x, y;
  kernels::Scratch scratch;

  ProbeMatrix(kernels::WeightType type, int64_t cols, uint64_t target_bytes, bool resident,
              uint32_t seed)
      : scratch(kernels::MatVecScratchBytes(type, cols)) {
    const int64_t row_bytes = kernels::RowBytes(type, cols);
    // Whole groups of 4 rows, which the interleaved layouts take.
    const int64_t rows =
        std::max<int64_t>(4, static_cast<int64_t>(target_bytes) / row_bytes / 4 * 4);
    bytes.resize(rows * row_bytes);
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::vector<float> src(cols);
    // A few distinct rows, repeated: the codebook types quantize slowly, and
    // the contents do not change the work.
    constexpr int64_t kDistinct = 8;
    for (int64_t r = 0; r < std::min(rows, kDistinct); ++r) {
      for (float& v : src) v = normal(rng);
      kernels::QuantizeRow(type, src.data(), bytes.data() + r * row_bytes, cols);
    }
    for (int64_t r = kDistinct; r < rows; ++r) {
      std::copy_n(bytes.data() + (r % kDistinct) * row_bytes, row_bytes,
                  bytes.data() + r * row_bytes);
    }
    view = kernels::DenseWeightView(type, rows, cols, bytes.data());
    if (resident) {
      const kernels::WeightLayout layout =
          kernels::ResidentLayoutFor(type, cols, kernels::DetectIsa());
      if (layout != kernels::WeightLayout::kRows) {
        kernels::InterleaveRows(type, rows, cols, bytes.data(), layout);
        view.layout = layout;
      }
    }
    x.resize(cols);
    for (float& v : x) v = normal(rng) * 50;
    y.resize(rows);
  }

  absl::Status Call() {
    return kernels::MatMul(view, x.data(), view.cols, 1, y.data(), view.rows, nullptr, &scratch);
  }
};

}  // namespace

std::vector<TypeBytes> ProductBytesByType(const model::Model& model, bool resident) {
  std::map<std::pair<kernels::WeightType, bool>, TypeBytes> by_type;
  auto add = [&](const model::TensorRef& t, uint64_t bytes) {
    const bool repacked = resident && t.interleaves;
    TypeBytes& e = by_type[{t.type, repacked}];
    e.type = t.type;
    e.repacked = repacked;
    e.bytes += bytes;
    e.cols = std::max(e.cols, t.cols);
  };
  const model::GlobalTensors& g = model.globals();
  // The output head; token_embd is a row per token (and, tied, the same
  // bytes as the head).
  if (IsMatrix(g.output)) add(g.output, g.output.rows * g.output.row_bytes * g.output.n_mat);
  model::ForEachTensor(model, [&](const model::TensorRef& t) {
    if (&t == &g.token_embd || &t == &g.output || &t == &g.output_norm || &t == &g.rope_freqs) {
      return;
    }
    if (IsMatrix(t)) add(t, t.rows * t.row_bytes * t.n_mat);
  });
  const model::HParams& hp = model.hparams();
  for (int64_t l = 0; l < static_cast<int64_t>(model.layers().size()); ++l) {
    if (!hp.IsMoeLayer(l)) continue;
    const model::LayerTensors& layer = model.layers()[l];
    for (const model::TensorRef* t : {&layer.gate_exps, &layer.up_exps, &layer.down_exps}) {
      if (IsMatrix(*t)) add(*t, hp.moe.n_expert_used * t->rows * t->row_bytes);
    }
  }
  std::vector<TypeBytes> out;
  for (const auto& [key, e] : by_type) out.push_back(e);
  std::sort(out.begin(), out.end(),
            [](const TypeBytes& a, const TypeBytes& b) { return a.bytes > b.bytes; });
  return out;
}

absl::StatusOr<double> MeasureKernelGbps(kernels::WeightType type, int64_t cols, bool resident,
                                         int threads, uint64_t bytes_per_thread, double seconds,
                                         int passes) {
  if (cols <= 0 || threads < 1 || cols % kernels::GetWeightTypeInfo(type).block_elems != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("no kernel probe for ", cols, " columns of ",
                     std::string(kernels::GetWeightTypeInfo(type).name)));
  }
  std::vector<ProbeMatrix> matrices;
  matrices.reserve(threads);
  for (int t = 0; t < threads; ++t) {
    matrices.emplace_back(type, cols, bytes_per_thread, resident, static_cast<uint32_t>(t + 1));
  }
  const double matrix_bytes =
      static_cast<double>(matrices[0].view.rows) * matrices[0].view.row_stride_bytes;
  // Calls per pass from one timed call (after one that warms the caches).
  RETURN_IF_ERROR(matrices[0].Call());
  const absl::Time t0 = absl::Now();
  RETURN_IF_ERROR(matrices[0].Call());
  const double one = std::max(1e-7, absl::ToDoubleSeconds(absl::Now() - t0));
  const int64_t calls = std::clamp<int64_t>(static_cast<int64_t>(seconds / one), 1, 100000);
  double best = 0;
  for (int p = 0; p < passes; ++p) {
    std::vector<absl::Status> status(threads);
    auto run = [&](int t) {
      for (int64_t c = 0; c < calls && status[t].ok(); ++c) status[t] = matrices[t].Call();
    };
    const absl::Time start = absl::Now();
    {
      std::vector<std::jthread> others;
      for (int t = 1; t < threads; ++t) others.emplace_back(run, t);
      run(0);
    }
    const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
    for (const absl::Status& s : status) RETURN_IF_ERROR(s);
    best = std::max(best, matrix_bytes * threads * calls / elapsed / 1e9);
  }
  return best;
}

absl::StatusOr<ComputeBound> MeasureComputeBound(const model::Model& model, bool resident,
                                                 int threads) {
  ComputeBound bound;
  bound.types = ProductBytesByType(model, resident);
  for (const TypeBytes& t : bound.types) {
    ASSIGN_OR_RETURN(double gbps, MeasureKernelGbps(t.type, t.cols, t.repacked, threads));
    bound.gbps.push_back(gbps);
    bound.seconds_per_token += static_cast<double>(t.bytes) / (gbps * 1e9);
  }
  return bound;
}

ComputeBound FasterOf(const ComputeBound& a, const ComputeBound& b) {
  ComputeBound out = a;
  out.seconds_per_token = 0;
  for (size_t i = 0; i < out.types.size(); ++i) {
    if (i < b.gbps.size() && b.types[i].type == a.types[i].type &&
        b.types[i].repacked == a.types[i].repacked) {
      out.gbps[i] = std::max(a.gbps[i], b.gbps[i]);
    }
    out.seconds_per_token += static_cast<double>(out.types[i].bytes) / (out.gbps[i] * 1e9);
  }
  return out;
}

}  // namespace waste::bench
