#include "storage/ggml_types.h"

#include <set>

#include "gtest/gtest.h"

namespace waste::storage {
namespace {

struct Expected {
  GgmlType type;
  uint32_t id;
  const char* name;
  int64_t block_size;
  int64_t type_size;
};

// Checked by hand against llama.cpp ggml/src/ggml-common.h (block structs and
// their static_asserts) and ggml/include/ggml.h (ids).
constexpr Expected kExpected[] = {
    {GgmlType::kF32, 0, "F32", 1, 4},
    {GgmlType::kF16, 1, "F16", 1, 2},
    {GgmlType::kQ4_0, 2, "Q4_0", 32, 18},
    {GgmlType::kQ4_1, 3, "Q4_1", 32, 20},
    {GgmlType::kQ5_0, 6, "Q5_0", 32, 22},
    {GgmlType::kQ5_1, 7, "Q5_1", 32, 24},
    {GgmlType::kQ8_0, 8, "Q8_0", 32, 34},
    {GgmlType::kQ8_1, 9, "Q8_1", 32, 36},
    {GgmlType::kQ2_K, 10, "Q2_K", 256, 84},
    {GgmlType::kQ3_K, 11, "Q3_K", 256, 110},
    {GgmlType::kQ4_K, 12, "Q4_K", 256, 144},
    {GgmlType::kQ5_K, 13, "Q5_K", 256, 176},
    {GgmlType::kQ6_K, 14, "Q6_K", 256, 210},
    {GgmlType::kQ8_K, 15, "Q8_K", 256, 292},
    {GgmlType::kIQ2_XXS, 16, "IQ2_XXS", 256, 66},
    {GgmlType::kIQ2_XS, 17, "IQ2_XS", 256, 74},
    {GgmlType::kIQ3_XXS, 18, "IQ3_XXS", 256, 98},
    {GgmlType::kIQ1_S, 19, "IQ1_S", 256, 50},
    {GgmlType::kIQ4_NL, 20, "IQ4_NL", 32, 18},
    {GgmlType::kIQ3_S, 21, "IQ3_S", 256, 110},
    {GgmlType::kIQ2_S, 22, "IQ2_S", 256, 82},
    {GgmlType::kIQ4_XS, 23, "IQ4_XS", 256, 136},
    {GgmlType::kI8, 24, "I8", 1, 1},
    {GgmlType::kI16, 25, "I16", 1, 2},
    {GgmlType::kI32, 26, "I32", 1, 4},
    {GgmlType::kI64, 27, "I64", 1, 8},
    {GgmlType::kF64, 28, "F64", 1, 8},
    {GgmlType::kIQ1_M, 29, "IQ1_M", 256, 56},
    {GgmlType::kBF16, 30, "BF16", 1, 2},
    {GgmlType::kTQ1_0, 34, "TQ1_0", 256, 54},
    {GgmlType::kTQ2_0, 35, "TQ2_0", 256, 66},
    {GgmlType::kMXFP4, 39, "MXFP4", 32, 17},
    {GgmlType::kNVFP4, 40, "NVFP4", 64, 36},
    {GgmlType::kQ1_0, 41, "Q1_0", 128, 18},
};

TEST(GgmlTypesTest, TableMatchesGgml) {
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.name);
    EXPECT_EQ(static_cast<uint32_t>(e.type), e.id);
    std::optional<GgmlTypeTraits> t = GetGgmlTypeTraits(e.id);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->type, e.type);
    EXPECT_EQ(t->name, e.name);
    EXPECT_EQ(t->block_size, e.block_size);
    EXPECT_EQ(t->type_size, e.type_size);
    EXPECT_EQ(GetGgmlTypeTraits(e.type).type_size, e.type_size);
    EXPECT_EQ(GgmlTypeName(e.type), e.name);
  }
  EXPECT_EQ(AllGgmlTypes().size(), std::size(kExpected));
}

TEST(GgmlTypesTest, RetiredAndUnknownIdsAreUndefined) {
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 42u, 1000u, 0xFFFFFFFFu}) {
    EXPECT_FALSE(GetGgmlTypeTraits(id).has_value()) << id;
  }
}

TEST(GgmlTypesTest, AllTypesInIdOrderAndUnique) {
  std::set<uint32_t> ids;
  uint32_t last = 0;
  for (const GgmlTypeTraits& t : AllGgmlTypes()) {
    const uint32_t id = static_cast<uint32_t>(t.type);
    EXPECT_TRUE(ids.insert(id).second);
    if (id != 0) {
      EXPECT_GT(id, last);
    }
    last = id;
  }
}

TEST(GgmlTypesTest, ParseIsCaseInsensitive) {
  EXPECT_EQ(ParseGgmlType("q4_k"), GgmlType::kQ4_K);
  EXPECT_EQ(ParseGgmlType("Q4_K"), GgmlType::kQ4_K);
  EXPECT_EQ(ParseGgmlType("iq2_xxs"), GgmlType::kIQ2_XXS);
  EXPECT_EQ(ParseGgmlType("bf16"), GgmlType::kBF16);
  EXPECT_FALSE(ParseGgmlType("q4_2").has_value());
  EXPECT_FALSE(ParseGgmlType("").has_value());
  for (const GgmlTypeTraits& t : AllGgmlTypes()) EXPECT_EQ(ParseGgmlType(t.name), t.type);
}

TEST(GgmlTypesTest, RowSize) {
  EXPECT_EQ(GgmlRowSize(GgmlType::kF32, 64), 256u);
  EXPECT_EQ(GgmlRowSize(GgmlType::kQ4_0, 64), 36u);
  EXPECT_EQ(GgmlRowSize(GgmlType::kQ4_K, 4096), 16u * 144u);
  EXPECT_EQ(GgmlRowSize(GgmlType::kQ8_0, 0), 0u);
  EXPECT_FALSE(GgmlRowSize(GgmlType::kQ4_0, 33).has_value());
  EXPECT_FALSE(GgmlRowSize(GgmlType::kQ4_K, 128).has_value());
  EXPECT_FALSE(GgmlRowSize(GgmlType::kF32, -1).has_value());
  // 2^62 F32 elements would be 2^64 bytes.
  EXPECT_FALSE(GgmlRowSize(GgmlType::kF32, int64_t{1} << 62).has_value());
  EXPECT_EQ(GgmlRowSize(GgmlType::kF32, int64_t{1} << 61), uint64_t{1} << 63);
}

}  // namespace
}  // namespace waste::storage
