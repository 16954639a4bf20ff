#include "storage/ggml_types.h"

#include <array>
#include <cctype>
#include <limits>

namespace waste::storage {
namespace {

// Block layouts as ggml defines them (ggml/src/ggml-common.h block structs and
// their static_asserts; ggml.c type_traits). QK_K super-blocks hold 256
// elements. Each byte count is the sum of the struct's fields:
//   Q4_0  = f16 d + 16 nibble bytes                         = 18
//   Q4_1  = f16 d, m + 16                                   = 20
//   Q5_0  = f16 d + 4 qh + 16                               = 22
//   Q5_1  = f16 d, m + 4 qh + 16                            = 24
//   Q8_0  = f16 d + 32                                      = 34
//   Q8_1  = f16 d, s + 32                                   = 36
//   Q2_K  = 16 scales + 64 qs + f16 d, dmin                 = 84
//   Q3_K  = 32 hmask + 64 qs + 12 scales + f16 d            = 110
//   Q4_K  = f16 d, dmin + 12 scales + 128 qs                = 144
//   Q5_K  = f16 d, dmin + 12 scales + 32 qh + 128 qs        = 176
//   Q6_K  = 128 ql + 64 qh + 16 scales + f16 d              = 210
//   Q8_K  = f32 d + 256 qs + 16 int16 bsums                 = 292
//   IQ2_XXS = f16 d + 32 uint16 qs                          = 66
//   IQ2_XS  = f16 d + 32 uint16 qs + 8 scales               = 74
//   IQ3_XXS = f16 d + 96 qs                                 = 98
//   IQ1_S   = f16 d + 32 qs + 8 uint16 qh                   = 50
//   IQ4_NL  = f16 d + 16 (32-element blocks)                = 18
//   IQ3_S   = f16 d + 64 qs + 8 qh + 32 signs + 4 scales    = 110
//   IQ2_S   = f16 d + 64 qs + 8 qh + 8 scales               = 82
//   IQ4_XS  = f16 d + uint16 scales_h + 4 scales_l + 128 qs = 136
//   IQ1_M   = 32 qs + 16 qh + 8 scales                      = 56
//   TQ1_0   = 48 qs + 4 qh + f16 d                          = 54
//   TQ2_0   = 64 qs + f16 d                                 = 66
//   MXFP4   = e8m0 e + 16 (32-element blocks)               = 17
//   NVFP4   = 4 ue4m3 scales + 32 (64-element blocks)       = 36
//   Q1_0    = f16 d + 16 (128-element blocks)               = 18
constexpr std::array kTraits = {
    GgmlTypeTraits{GgmlType::kF32, "F32", 1, 4},
    GgmlTypeTraits{GgmlType::kF16, "F16", 1, 2},
    GgmlTypeTraits{GgmlType::kQ4_0, "Q4_0", 32, 18},
    GgmlTypeTraits{GgmlType::kQ4_1, "Q4_1", 32, 20},
    GgmlTypeTraits{GgmlType::kQ5_0, "Q5_0", 32, 22},
    GgmlTypeTraits{GgmlType::kQ5_1, "Q5_1", 32, 24},
    GgmlTypeTraits{GgmlType::kQ8_0, "Q8_0", 32, 34},
    GgmlTypeTraits{GgmlType::kQ8_1, "Q8_1", 32, 36},
    GgmlTypeTraits{GgmlType::kQ2_K, "Q2_K", 256, 84},
    GgmlTypeTraits{GgmlType::kQ3_K, "Q3_K", 256, 110},
    GgmlTypeTraits{GgmlType::kQ4_K, "Q4_K", 256, 144},
    GgmlTypeTraits{GgmlType::kQ5_K, "Q5_K", 256, 176},
    GgmlTypeTraits{GgmlType::kQ6_K, "Q6_K", 256, 210},
    GgmlTypeTraits{GgmlType::kQ8_K, "Q8_K", 256, 292},
    GgmlTypeTraits{GgmlType::kIQ2_XXS, "IQ2_XXS", 256, 66},
    GgmlTypeTraits{GgmlType::kIQ2_XS, "IQ2_XS", 256, 74},
    GgmlTypeTraits{GgmlType::kIQ3_XXS, "IQ3_XXS", 256, 98},
    GgmlTypeTraits{GgmlType::kIQ1_S, "IQ1_S", 256, 50},
    GgmlTypeTraits{GgmlType::kIQ4_NL, "IQ4_NL", 32, 18},
    GgmlTypeTraits{GgmlType::kIQ3_S, "IQ3_S", 256, 110},
    GgmlTypeTraits{GgmlType::kIQ2_S, "IQ2_S", 256, 82},
    GgmlTypeTraits{GgmlType::kIQ4_XS, "IQ4_XS", 256, 136},
    GgmlTypeTraits{GgmlType::kI8, "I8", 1, 1},
    GgmlTypeTraits{GgmlType::kI16, "I16", 1, 2},
    GgmlTypeTraits{GgmlType::kI32, "I32", 1, 4},
    GgmlTypeTraits{GgmlType::kI64, "I64", 1, 8},
    GgmlTypeTraits{GgmlType::kF64, "F64", 1, 8},
    GgmlTypeTraits{GgmlType::kIQ1_M, "IQ1_M", 256, 56},
    GgmlTypeTraits{GgmlType::kBF16, "BF16", 1, 2},
    GgmlTypeTraits{GgmlType::kTQ1_0, "TQ1_0", 256, 54},
    GgmlTypeTraits{GgmlType::kTQ2_0, "TQ2_0", 256, 66},
    GgmlTypeTraits{GgmlType::kMXFP4, "MXFP4", 32, 17},
    GgmlTypeTraits{GgmlType::kNVFP4, "NVFP4", 64, 36},
    GgmlTypeTraits{GgmlType::kQ1_0, "Q1_0", 128, 18},
};

const GgmlTypeTraits* FindTraits(uint32_t type_id) {
  for (const GgmlTypeTraits& traits : kTraits) {
    if (static_cast<uint32_t>(traits.type) == type_id) return &traits;
  }
  return nullptr;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(a[i])) !=
        std::toupper(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<GgmlTypeTraits> GetGgmlTypeTraits(uint32_t type_id) {
  const GgmlTypeTraits* traits = FindTraits(type_id);
  if (traits == nullptr) return std::nullopt;
  return *traits;
}

GgmlTypeTraits GetGgmlTypeTraits(GgmlType type) {
  const GgmlTypeTraits* traits = FindTraits(static_cast<uint32_t>(type));
  // Every enumerator has a row; a cast from an arbitrary integer does not.
  if (traits == nullptr) return GgmlTypeTraits{type, "UNKNOWN", 1, 0};
  return *traits;
}

std::string_view GgmlTypeName(GgmlType type) { return GetGgmlTypeTraits(type).name; }

std::optional<GgmlType> ParseGgmlType(std::string_view name) {
  for (const GgmlTypeTraits& traits : kTraits) {
    if (EqualsIgnoreCase(traits.name, name)) return traits.type;
  }
  return std::nullopt;
}

std::optional<uint64_t> GgmlRowSize(GgmlType type, int64_t n) {
  const GgmlTypeTraits traits = GetGgmlTypeTraits(type);
  if (n < 0 || traits.type_size == 0 || n % traits.block_size != 0) return std::nullopt;
  const uint64_t blocks = static_cast<uint64_t>(n / traits.block_size);
  const uint64_t type_size = static_cast<uint64_t>(traits.type_size);
  if (blocks > std::numeric_limits<uint64_t>::max() / type_size) return std::nullopt;
  return blocks * type_size;
}

std::span<const GgmlTypeTraits> AllGgmlTypes() { return kTraits; }

}  // namespace waste::storage
