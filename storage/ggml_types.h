// ggml tensor element types, numbered as in ggml.h, with their block
// layouts: how many elements a block holds and how many bytes it takes.
// The table is constant data: every function here is thread-safe.
#ifndef WASTE_STORAGE_GGML_TYPES_H_
#define WASTE_STORAGE_GGML_TYPES_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace waste::storage {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
  // Added after the published GGUF spec (which stops at 39); llama.cpp's
  // ggml.h and gguf-py define them, and files using them exist.
  kNVFP4 = 40,
  kQ1_0 = 41,
};

struct GgmlTypeTraits {
  GgmlType type;
  std::string_view name;  // As llama.cpp prints it: "F32", "Q4_K", "IQ2_XXS".
  int64_t block_size;     // Elements per block (1 for plain types).
  int64_t type_size;      // Bytes per block.
};

// Traits of a type id read from a file; nullopt for ids ggml does not define
// (or that it has retired, such as 4 and 5, Q4_2 and Q4_3).
std::optional<GgmlTypeTraits> GetGgmlTypeTraits(uint32_t type_id);
GgmlTypeTraits GetGgmlTypeTraits(GgmlType type);
std::string_view GgmlTypeName(GgmlType type);
// Parses a name such as "q4_k" or "Q4_K" (case-insensitive).
std::optional<GgmlType> ParseGgmlType(std::string_view name);

// Bytes of a row of `n` elements; nullopt when n is not a whole number of
// blocks or the size would overflow.
std::optional<uint64_t> GgmlRowSize(GgmlType type, int64_t n);

// Every type ggml defines, in id order (for tests, tools and messages).
std::span<const GgmlTypeTraits> AllGgmlTypes();

}  // namespace waste::storage

#endif  // WASTE_STORAGE_GGML_TYPES_H_
