#include "daemon/kernels/quantize_iq.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "daemon/kernels/fp16.h"
#include "daemon/kernels/iq_grids.h"

namespace waste::kernels::internal {
namespace {

// A codebook: `entries` points of `dims` values (each one of `levels`),
// and for every point of the full lattice levels^dims the entry nearest it.
class Codebook {
 public:
  template <typename Entry>
  Codebook(const Entry* table, int entries, int dims, std::vector<int> levels)
      : dims_(dims), levels_(std::move(levels)), values_(entries * dims) {
    for (int e = 0; e < entries; ++e) {
      for (int j = 0; j < dims; ++j) {
        values_[e * dims + j] = static_cast<int8_t>(table[e] >> (8 * j));
      }
    }
    int points = 1;
    for (int j = 0; j < dims; ++j) points *= static_cast<int>(levels_.size());
    nearest_.resize(points);
    std::vector<int> v(dims);
    for (int p = 0; p < points; ++p) {
      for (int j = 0, rest = p; j < dims; ++j, rest /= static_cast<int>(levels_.size())) {
        v[j] = levels_[rest % levels_.size()];
      }
      int best = 0, best_err = -1;
      for (int e = 0; e < entries; ++e) {
        int err = 0;
        for (int j = 0; j < dims; ++j)
          err += (v[j] - values_[e * dims + j]) * (v[j] - values_[e * dims + j]);
        if (best_err < 0 || err < best_err) best = e, best_err = err;
      }
      nearest_[p] = static_cast<uint16_t>(best);
    }
  }

  // The kNeighbours entries nearest each lattice point (built on first use
  // by a weighted search: the plain one never needs them).
  static constexpr int kNeighbours = 8;
  const uint16_t* Neighbours(int point) const {
    std::call_once(neighbours_once_, [this] { BuildNeighbours(); });
    return &neighbours_[point * kNeighbours];
  }

  int dims() const { return dims_; }
  int Value(int entry, int j) const { return values_[entry * dims_ + j]; }

  // The entry for `dims` targets in grid units: each rounded to its nearest
  // level, then the lattice point's nearest entry.
  int Nearest(const float* t) const { return nearest_[LatticePoint(t)]; }

  // The entry of least weighted squared distance sum w_j (t_j - v_j)^2
  // among the neighbours of the targets' lattice point.
  int NearestWeighted(const float* t, const float* w) const {
    const uint16_t* candidates = Neighbours(LatticePoint(t));
    int best = candidates[0];
    float best_err = -1;
    for (int c = 0; c < kNeighbours; ++c) {
      const int e = candidates[c];
      float err = 0;
      for (int j = 0; j < dims_; ++j) {
        const float diff = t[j] - values_[e * dims_ + j];
        err += w[j] * diff * diff;
      }
      if (best_err < 0 || err < best_err) best = e, best_err = err;
    }
    return best;
  }

 private:
  int LatticePoint(const float* t) const {
    int p = 0;
    for (int j = dims_ - 1; j >= 0; --j) {
      int li = 0;
      for (size_t i = 1; i < levels_.size(); ++i) {
        if (std::fabs(t[j] - levels_[i]) < std::fabs(t[j] - levels_[li])) li = static_cast<int>(i);
      }
      p = p * static_cast<int>(levels_.size()) + li;
    }
    return p;
  }

  void BuildNeighbours() const {
    const int points = static_cast<int>(nearest_.size());
    const int entries = static_cast<int>(values_.size()) / dims_;
    neighbours_.resize(static_cast<size_t>(points) * kNeighbours);
    std::vector<std::pair<int, int>> by_distance(entries);
    std::vector<int> v(dims_);
    for (int p = 0; p < points; ++p) {
      for (int j = 0, rest = p; j < dims_; ++j, rest /= static_cast<int>(levels_.size())) {
        v[j] = levels_[rest % levels_.size()];
      }
      for (int e = 0; e < entries; ++e) {
        int err = 0;
        for (int j = 0; j < dims_; ++j) {
          err += (v[j] - values_[e * dims_ + j]) * (v[j] - values_[e * dims_ + j]);
        }
        by_distance[e] = {err, e};
      }
      std::partial_sort(by_distance.begin(), by_distance.begin() + kNeighbours, by_distance.end());
      for (int c = 0; c < kNeighbours; ++c) {
        neighbours_[p * kNeighbours + c] = static_cast<uint16_t>(by_distance[c].second);
      }
    }
  }

  int dims_;
  std::vector<int> levels_;
  std::vector<int8_t> values_;
  std::vector<uint16_t> nearest_;
  mutable std::once_flag neighbours_once_;
  mutable std::vector<uint16_t> neighbours_;
};

const std::vector<int> kIq2Levels = {8, 25, 43};

const Codebook& BookFor(WeightType type) {
  switch (type) {
    case WeightType::kIQ2_XXS: {
      static const Codebook book(kIq2XxsGrid, 256, 8, kIq2Levels);
      return book;
    }
    case WeightType::kIQ2_XS: {
      static const Codebook book(kIq2XsGrid, 512, 8, kIq2Levels);
      return book;
    }
    case WeightType::kIQ2_S: {
      static const Codebook book(kIq2SGrid, 1024, 8, kIq2Levels);
      return book;
    }
    case WeightType::kIQ3_XXS: {
      static const Codebook book(kIq3XxsGrid, 256, 4, {4, 12, 20, 28, 36, 44, 52, 62});
      return book;
    }
    case WeightType::kIQ3_S: {
      static const Codebook book(kIq3SGrid, 512, 4, {1, 3, 5, 7, 9, 11, 13, 15});
      return book;
    }
    default: {
      static const Codebook book(kIq1SGrid, 2048, 8, {-1, 0, 1});
      return book;
    }
  }
}

// 8 values as signed grid entries at scale s (x ~= s * sign * value): the
// entries (2 for a 4-value book), the sign byte (bit j: element j negative;
// with `even` the count of negatives is made even by flipping the element
// where that costs least) and the squared error.
//
// With weights `w` (null: all 1) the errors are weighted and each entry is
// the weighted-nearest of its lattice point's neighbours.
double EncodeSigned8(const Codebook& book, const float* x, const float* w, float s, bool even,
                     int* entries, uint8_t* signs) {
  float t[8];
  for (int j = 0; j < 8; ++j) t[j] = s > 0 ? std::fabs(x[j]) / s : 0;
  for (int k = 0; k < 8 / book.dims(); ++k) {
    entries[k] = w != nullptr ? book.NearestWeighted(t + k * book.dims(), w + k * book.dims())
                              : book.Nearest(t + k * book.dims());
  }
  int v[8];
  for (int j = 0; j < 8; ++j) v[j] = book.Value(entries[j / book.dims()], j % book.dims());
  int bits = 0;
  for (int j = 0; j < 8; ++j) bits |= (x[j] < 0) << j;
  if (even && (__builtin_popcount(bits) & 1)) {
    int flip = 0;
    // Flipping element j costs 4 s w_j v_j |x_j|.
    auto cost = [&](int j) { return (w != nullptr ? w[j] : 1.0f) * v[j] * std::fabs(x[j]); };
    for (int j = 1; j < 8; ++j) {
      if (cost(j) < cost(flip)) flip = j;
    }
    bits ^= 1 << flip;
  }
  double err = 0;
  for (int j = 0; j < 8; ++j) {
    const float y = s * v[j] * ((bits >> j) & 1 ? -1 : 1);
    err += (w != nullptr ? w[j] : 1.0f) * (y - x[j]) * (y - x[j]);
  }
  *signs = static_cast<uint8_t>(bits);
  return err;
}

// IQ1: 8 values as s * (8 * grid + (negative ? -1 : 1)); returns the error.
double EncodeIq1(const Codebook& book, const float* x, const float* w, float s, bool negative,
                 int* entry) {
  const float shift = negative ? -0.125f : 0.125f;
  float t[8];
  for (int j = 0; j < 8; ++j) t[j] = s > 0 ? x[j] / (8 * s) - shift : 0;
  *entry = w != nullptr ? book.NearestWeighted(t, w) : book.Nearest(t);
  double err = 0;
  for (int j = 0; j < 8; ++j) {
    const float y = s * (8 * book.Value(*entry, j) + (negative ? -1 : 1));
    err += (w != nullptr ? w[j] : 1.0f) * (y - x[j]) * (y - x[j]);
  }
  return err;
}

// How a type spends its bits, for the shared search below.
struct GridFormat {
  int scale_elems;  // 32 or 16 elements per scale.
  int scale_max;    // Scale codes k are 0 .. scale_max: s = d (2k + 1) / div.
  float scale_div;  // 8 (IQ2, IQ1), 4 (IQ3_XXS), 1 (IQ3_S).
  float top;        // The largest |code| (grid units): where amax lands.
  bool even_signs;  // Signs stored as 7 bits + parity.
  bool iq1;         // Codes 8 * grid +- 1 (no signs).
};

GridFormat FormatOf(WeightType type) {
  switch (type) {
    case WeightType::kIQ2_XXS:
      return {32, 15, 8, 43, true, false};
    case WeightType::kIQ2_XS:
      return {16, 15, 8, 43, true, false};
    case WeightType::kIQ2_S:
      return {16, 15, 8, 43, false, false};
    case WeightType::kIQ3_XXS:
      return {32, 15, 4, 62, true, false};
    case WeightType::kIQ3_S:
      return {32, 15, 1, 15, false, false};
    case WeightType::kIQ1_S:
      return {32, 7, 8, 9, false, true};
    default:  // IQ1_M
      return {16, 7, 8, 9, false, true};
  }
}

// One block's choices: per 8 elements the entries (2 for IQ3), the sign byte
// or IQ1 shift sign; per scale group the code k; and d.
struct BlockCodes {
  int entries[32][2];
  uint8_t signs[32];
  bool negative[32];
  int k[16];
  Half d;
};

// Encodes the 8-element pieces of one scale group at scale s; returns the
// error. IQ1_S decides its shift sign for the whole 32 (shared_shift).
// `w` (null: unweighted) are the group's element weights.
double EncodeScaleGroup(const Codebook& book, const GridFormat& f, bool shared_shift,
                        const float* x, const float* w, int first_piece, float s, BlockCodes* c) {
  const int pieces = f.scale_elems / 8;
  auto piece_w = [w](int p) { return w != nullptr ? w + 8 * p : nullptr; };
  double total = 0;
  if (f.iq1 && shared_shift) {
    double err[2] = {0, 0};
    int entries[2][4];
    for (int neg = 0; neg < 2; ++neg) {
      for (int p = 0; p < pieces; ++p)
        err[neg] += EncodeIq1(book, x + 8 * p, piece_w(p), s, neg, &entries[neg][p]);
    }
    const int neg = err[1] < err[0];
    for (int p = 0; p < pieces; ++p) {
      c->entries[first_piece + p][0] = entries[neg][p];
      c->negative[first_piece + p] = neg;
    }
    return err[neg];
  }
  for (int p = 0; p < pieces; ++p) {
    const int i = first_piece + p;
    if (f.iq1) {
      int e0, e1;
      const double a = EncodeIq1(book, x + 8 * p, piece_w(p), s, false, &e0);
      const double b = EncodeIq1(book, x + 8 * p, piece_w(p), s, true, &e1);
      c->negative[i] = b < a;
      c->entries[i][0] = b < a ? e1 : e0;
      total += std::min(a, b);
    } else {
      total +=
          EncodeSigned8(book, x + 8 * p, piece_w(p), s, f.even_signs, c->entries[i], &c->signs[i]);
    }
  }
  return total;
}

// The least-squares scale of a group for the codes it holds in `c`:
// sum w x u / sum w u^2, u each element's decoded value at scale 1.
float RefitGroupScale(const Codebook& book, const GridFormat& f, const float* x, const float* w,
                      int first_piece, const BlockCodes& c, float fallback) {
  double sxu = 0, suu = 0;
  for (int p = 0; p < f.scale_elems / 8; ++p) {
    const int i = first_piece + p;
    for (int j = 0; j < 8; ++j) {
      float u;
      if (f.iq1) {
        u = 8.0f * book.Value(c.entries[i][0], j) + (c.negative[i] ? -1.0f : 1.0f);
      } else {
        const int dims = book.dims();
        u = static_cast<float>(book.Value(c.entries[i][j / dims], j % dims));
        if ((c.signs[i] >> j) & 1) u = -u;
      }
      const float wj = w[8 * p + j];
      sxu += wj * x[8 * p + j] * u, suu += wj * u * u;
    }
  }
  return suu > 0 && sxu > 0 ? static_cast<float>(sxu / suu) : fallback;
}

void SearchBlock(WeightType type, const float* x, const float* w, BlockCodes* c) {
  const Codebook& book = BookFor(type);
  const GridFormat f = FormatOf(type);
  const bool shared_shift = type == WeightType::kIQ1_S;
  const int groups = kQK_K / f.scale_elems;
  auto group_w = [&](int g) { return w != nullptr ? w + g * f.scale_elems : nullptr; };
  // Per scale group: the best of a few scales around amax / top (weighted:
  // more of them, each also refit to its codes).
  static constexpr float kPlain[] = {0.7f, 0.8f, 0.9f, 1.0f, 1.1f};
  static constexpr float kWeighted[] = {0.6f,  0.65f, 0.7f,  0.75f, 0.8f,  0.85f, 0.9f,
                                        0.95f, 1.0f,  1.05f, 1.1f,  1.15f, 1.2f};
  const std::span<const float> factors =
      w != nullptr ? std::span<const float>(kWeighted) : std::span<const float>(kPlain);
  float best_scale[16];
  for (int g = 0; g < groups; ++g) {
    const float* xg = x + g * f.scale_elems;
    const int first = g * f.scale_elems / 8;
    float amax = 0;
    for (int i = 0; i < f.scale_elems; ++i) amax = std::max(amax, std::fabs(xg[i]));
    best_scale[g] = 0;
    double best_err = -1;
    for (float factor : factors) {
      float s = amax / f.top * factor;
      double err = EncodeScaleGroup(book, f, shared_shift, xg, group_w(g), first, s, c);
      if (w != nullptr) {
        const float refit = RefitGroupScale(book, f, xg, group_w(g), first, *c, s);
        const double refit_err =
            EncodeScaleGroup(book, f, shared_shift, xg, group_w(g), first, refit, c);
        if (refit_err < err) err = refit_err, s = refit;
      }
      if (best_err < 0 || err < best_err) best_err = err, best_scale[g] = s;
    }
  }
  // d so that the largest scale is code scale_max, then each group's code.
  const float max_scale = *std::max_element(best_scale, best_scale + groups);
  c->d = F32ToF16(max_scale * f.scale_div / (2 * f.scale_max + 1));
  const float d = F16ToF32(c->d);
  for (int g = 0; g < groups; ++g) {
    c->k[g] = d > 0
                  ? std::clamp(
                        static_cast<int>(std::nearbyint((best_scale[g] * f.scale_div / d - 1) / 2)),
                        0, f.scale_max)
                  : 0;
    const float s = d * static_cast<float>(2 * c->k[g] + 1) / f.scale_div;
    EncodeScaleGroup(book, f, shared_shift, x + g * f.scale_elems, group_w(g),
                     g * f.scale_elems / 8, s, c);
  }
}

void StoreU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
void StoreU32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

// The bit layouts iq_decode.h reads.
void Pack(WeightType type, const BlockCodes& c, uint8_t* out) {
  switch (type) {
    case WeightType::kIQ2_XXS: {
      auto* b = reinterpret_cast<BlockIQ2_XXS*>(out);
      b->d = c.d;
      auto* qs = reinterpret_cast<uint8_t*>(b->qs);
      for (int g = 0; g < 8; ++g) {
        uint32_t aux = static_cast<uint32_t>(c.k[g]) << 28;
        for (int l = 0; l < 4; ++l) {
          qs[8 * g + l] = static_cast<uint8_t>(c.entries[4 * g + l][0]);
          aux |= static_cast<uint32_t>(c.signs[4 * g + l] & 127) << (7 * l);
        }
        StoreU32(qs + 8 * g + 4, aux);
      }
      return;
    }
    case WeightType::kIQ2_XS: {
      auto* b = reinterpret_cast<BlockIQ2_XS*>(out);
      b->d = c.d;
      for (int i = 0; i < 32; ++i) {
        StoreU16(reinterpret_cast<uint8_t*>(b->qs) + 2 * i,
                 static_cast<uint16_t>(c.entries[i][0] | ((c.signs[i] & 127) << 9)));
      }
      for (int g = 0; g < 8; ++g)
        b->scales[g] = static_cast<uint8_t>(c.k[2 * g] | (c.k[2 * g + 1] << 4));
      return;
    }
    case WeightType::kIQ2_S: {
      auto* b = reinterpret_cast<BlockIQ2_S*>(out);
      b->d = c.d;
      std::memset(b->qh, 0, sizeof(b->qh));
      for (int i = 0; i < 32; ++i) {
        b->qs[i] = static_cast<uint8_t>(c.entries[i][0] & 255);
        b->qs[32 + i] = c.signs[i];
        b->qh[i / 4] |= static_cast<uint8_t>((c.entries[i][0] >> 8) << (2 * (i % 4)));
      }
      for (int g = 0; g < 8; ++g)
        b->scales[g] = static_cast<uint8_t>(c.k[2 * g] | (c.k[2 * g + 1] << 4));
      return;
    }
    case WeightType::kIQ3_XXS: {
      auto* b = reinterpret_cast<BlockIQ3_XXS*>(out);
      b->d = c.d;
      for (int g = 0; g < 8; ++g) {
        uint32_t aux = static_cast<uint32_t>(c.k[g]) << 28;
        for (int l = 0; l < 4; ++l) {
          b->qs[8 * g + 2 * l] = static_cast<uint8_t>(c.entries[4 * g + l][0]);
          b->qs[8 * g + 2 * l + 1] = static_cast<uint8_t>(c.entries[4 * g + l][1]);
          aux |= static_cast<uint32_t>(c.signs[4 * g + l] & 127) << (7 * l);
        }
        StoreU32(b->qs + kQK_K / 4 + 4 * g, aux);
      }
      return;
    }
    case WeightType::kIQ3_S: {
      auto* b = reinterpret_cast<BlockIQ3_S*>(out);
      b->d = c.d;
      std::memset(b->qh, 0, sizeof(b->qh));
      std::memset(b->scales, 0, sizeof(b->scales));
      for (int i = 0; i < 32; ++i) {
        const int g = i / 4, l = i % 4;
        for (int h = 0; h < 2; ++h) {
          b->qs[8 * g + 2 * l + h] = static_cast<uint8_t>(c.entries[i][h] & 255);
          b->qh[g] |= static_cast<uint8_t>((c.entries[i][h] >> 8) << (2 * l + h));
        }
        b->signs[i] = c.signs[i];
      }
      for (int g = 0; g < 8; ++g) b->scales[g / 2] |= static_cast<uint8_t>(c.k[g] << (4 * (g % 2)));
      return;
    }
    case WeightType::kIQ1_S: {
      auto* b = reinterpret_cast<BlockIQ1_S*>(out);
      b->d = c.d;
      for (int g = 0; g < 8; ++g) {
        uint16_t qh = static_cast<uint16_t>((c.k[g] << 12) | (c.negative[4 * g] ? 0x8000 : 0));
        for (int l = 0; l < 4; ++l) {
          b->qs[4 * g + l] = static_cast<uint8_t>(c.entries[4 * g + l][0] & 255);
          qh |= static_cast<uint16_t>((c.entries[4 * g + l][0] >> 8) << (3 * l));
        }
        StoreU16(reinterpret_cast<uint8_t*>(b->qh) + 2 * g, qh);
      }
      return;
    }
    default: {  // IQ1_M
      auto* b = reinterpret_cast<BlockIQ1_M*>(out);
      std::memset(b->qh, 0, sizeof(b->qh));
      uint16_t sc[4] = {0, 0, 0, 0};
      for (int i = 0; i < 32; ++i) {
        b->qs[i] = static_cast<uint8_t>(c.entries[i][0] & 255);
        const int nibble = (c.entries[i][0] >> 8) | (c.negative[i] ? 8 : 0);
        b->qh[i / 2] |= static_cast<uint8_t>(nibble << (4 * (i % 2)));
      }
      for (int g = 0; g < 8; ++g) {
        sc[g / 2] |= static_cast<uint16_t>((c.k[2 * g] | (c.k[2 * g + 1] << 3)) << (6 * (g % 2)));
      }
      for (int i = 0; i < 4; ++i) {
        sc[i] |= static_cast<uint16_t>(((c.d >> (4 * i)) & 0xF) << 12);
        StoreU16(b->scales + 2 * i, sc[i]);
      }
      return;
    }
  }
}

}  // namespace

void QuantizeGridRow(WeightType type, const float* src, void* dst, int64_t n,
                     const float* importance) {
  WCHECK(IsGridType(type) && n % kQK_K == 0) << GetWeightTypeInfo(type).name << " row of " << n;
  const int block_bytes = GetWeightTypeInfo(type).block_bytes;
  float w[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    BlockCodes codes{};
    if (importance != nullptr) ElementWeights(src + i * kQK_K, importance + i * kQK_K, kQK_K, w);
    SearchBlock(type, src + i * kQK_K, importance != nullptr ? w : nullptr, &codes);
    Pack(type, codes, static_cast<uint8_t*>(dst) + i * block_bytes);
  }
}

}  // namespace waste::kernels::internal
