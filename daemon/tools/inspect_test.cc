#include "daemon/tools/inspect.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_split.h"
#include "daemon/tools/synthetic_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/gguf_writer.h"
#include "storage/mem_env.h"
#include "tests/testdata.h"

namespace waste::tools {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

std::string Stories() { return waste::testing::ModelPath("stories260K/stories260K.gguf"); }
std::string BadFile() {
  return waste::testing::ModelPath("gguf-conformance/test_writer.nonstandard-kvtype13.gguf");
}

TEST(InspectTest, DescribesStories260K) {
  absl::StatusOr<std::string> text = InspectModel(storage::Env::Default(), Stories(), false);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("architecture  llama\n"));
  EXPECT_THAT(*text, HasSubstr("48 tensors"));
  EXPECT_THAT(*text, HasSubstr("vocab 512"));
  EXPECT_THAT(*text, HasSubstr("layers        5\n"));
  EXPECT_THAT(*text, HasSubstr("block_count"));
  EXPECT_THAT(*text, HasSubstr("dense_ffn"));
  EXPECT_THAT(*text, HasSubstr("  0-4 "));  // Five identical layers, one row.
  EXPECT_THAT(*text, HasSubstr("F32"));
}

TEST(InspectTest, JsonHasTheSameNumbers) {
  absl::StatusOr<std::string> json = InspectModel(storage::Env::Default(), Stories(), true);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"architecture\": \"llama\""));
  EXPECT_THAT(*json, HasSubstr("\"tensor_count\": 48"));
  EXPECT_THAT(*json, HasSubstr("\"vocab_size\": 512"));
  EXPECT_THAT(*json, HasSubstr("\"block_count\": 5"));
  EXPECT_THAT(*json, HasSubstr("\"index\": 4"));
  EXPECT_EQ(json->find("\"index\": 5"), std::string::npos);
  EXPECT_THAT(*json, HasSubstr("\"embeddings\": 131072"));
  EXPECT_EQ(json->front(), '{');

  const Json doc = Json::parse(*json, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(doc.is_discarded()) << *json;
  EXPECT_EQ(doc.begin().key(), "file");  // Keys in the order written.
  EXPECT_EQ(doc.at("tensor_count"), 48);
  EXPECT_TRUE(doc.at("file_bytes").is_number_unsigned());
  EXPECT_EQ(doc.at("tokenizer").at("vocab_size"), 512);
  EXPECT_EQ(doc.at("layers").size(), 5u);
  EXPECT_TRUE(doc.at("hparams").at("block_count").is_number_unsigned());
  EXPECT_EQ(doc.at("hparams").at("attention.layer_norm_rms_epsilon"), 1e-5);
}

// Metadata strings are not checked for UTF-8 and floats may be NaN; the JSON
// stays valid, numbers keep their type.
TEST(InspectTest, JsonStaysValidForAnyMetadata) {
  std::string bytes;
  storage::StringSink sink(&bytes);
  storage::GgufWriter writer(&sink);
  ASSERT_TRUE(writer.AddString("general.architecture", "llama").ok());
  ASSERT_TRUE(writer.AddUint32("llama.block_count", 1).ok());
  ASSERT_TRUE(writer.AddString("llama.note", "caf\xe9 \"x\"\n").ok());
  ASSERT_TRUE(writer.AddInt32Array("llama.heads", {4, -1}).ok());
  ASSERT_TRUE(writer.AddFloat32("llama.rope.freq_base", 10000.5f).ok());
  ASSERT_TRUE(writer.AddFloat32("llama.nan", std::nanf("")).ok());
  ASSERT_TRUE(writer.AddTensor("blk.0.attn_norm.weight", storage::GgmlType::kF32, {8}).ok());
  ASSERT_TRUE(writer.WriteHeader().ok());
  ASSERT_TRUE(writer.WriteTensorData("blk.0.attn_norm.weight", std::string(32, '\0')).ok());
  ASSERT_TRUE(writer.Finish().ok());
  storage::MemEnv env;
  env.SetFile("/bad.gguf", bytes);
  absl::StatusOr<std::string> json = InspectModel(&env, "/bad.gguf", true);
  ASSERT_TRUE(json.ok()) << json.status();
  const Json doc = Json::parse(*json, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(doc.is_discarded()) << *json;
  EXPECT_EQ(doc.at("hparams").at("note"), "caf\xef\xbf\xbd \"x\"\n");  // U+FFFD for the bad byte.
  EXPECT_EQ(doc.at("hparams").at("heads"), Json::array({4, -1}));
  EXPECT_EQ(doc.at("hparams").at("rope.freq_base"), 10000.5);
  EXPECT_TRUE(doc.at("hparams").at("nan").is_null());
}

TEST(InspectTest, RefusesABadFileWithOneLine) {
  absl::StatusOr<std::string> report = InspectModel(storage::Env::Default(), BadFile(), false);
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(std::string(report.status().message()), HasSubstr("type 13"));
  EXPECT_EQ(report.status().message().find('\n'), std::string::npos);
}

TEST(InspectTest, ReportsExpertsOfASyntheticDeepseek2) {
  storage::MemEnv env;
  MkModelOptions o;
  o.arch = SyntheticArch::kDeepseek2;
  o.out = "/ds.gguf";
  o.layers = 3;
  o.experts = 16;
  o.experts_used = 4;
  o.ctx = 16384;
  ASSERT_TRUE(WriteSyntheticModel(o, &env).ok());
  absl::StatusOr<std::string> text = InspectModel(&env, o.out, false);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("16 routed (4 used per token), 1 shared, in 2 layers"));
  EXPECT_THAT(*text, HasSubstr("rope.scaling.type                        yarn"));
  EXPECT_THAT(*text, HasSubstr("routed_experts"));
  EXPECT_THAT(*text, HasSubstr("shared_experts"));
  absl::StatusOr<std::string> json = InspectModel(&env, o.out, true);
  ASSERT_TRUE(json.ok());
  EXPECT_THAT(*json, HasSubstr("\"expert_count\": 16"));
  EXPECT_THAT(*json, HasSubstr("\"moe_layers\": 2"));
  EXPECT_THAT(*json, HasSubstr("\"model\": \"gpt2\""));
  EXPECT_THAT(*json, HasSubstr("\"mla_form\": \"split\""));
  EXPECT_THAT(*text, HasSubstr("MLA with attn_k_b / attn_v_b"));

  o.mla_fused = true;
  o.out = "/ds-fused.gguf";
  ASSERT_TRUE(WriteSyntheticModel(o, &env).ok());
  text = InspectModel(&env, o.out, false);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("MLA with one attn_kv_b per layer"));
  json = InspectModel(&env, o.out, true);
  ASSERT_TRUE(json.ok());
  EXPECT_THAT(*json, HasSubstr("\"mla_form\": \"fused\""));
}

// Tensor types the engine cannot compute are still described.
TEST(InspectTest, DescribesTypesTheEngineCannotCompute) {
  std::string bytes;
  storage::StringSink sink(&bytes);
  storage::GgufWriter writer(&sink);
  ASSERT_TRUE(writer.AddString("general.architecture", "llama").ok());
  ASSERT_TRUE(writer.AddUint32("llama.block_count", 1).ok());
  ASSERT_TRUE(writer.AddTensor("blk.0.attn_q.weight", storage::GgmlType::kIQ2_XXS, {256, 4}).ok());
  ASSERT_TRUE(writer.AddTensor("blk.0.ffn_up.weight", storage::GgmlType::kTQ1_0, {256, 4}).ok());
  ASSERT_TRUE(writer.WriteHeader().ok());
  ASSERT_TRUE(
      writer
          .WriteTensorData(
              "blk.0.attn_q.weight",
              std::string(*storage::GgmlRowSize(storage::GgmlType::kIQ2_XXS, 256) * 4, '\0'))
          .ok());
  ASSERT_TRUE(writer
                  .WriteTensorData(
                      "blk.0.ffn_up.weight",
                      std::string(*storage::GgmlRowSize(storage::GgmlType::kTQ1_0, 256) * 4, '\0'))
                  .ok());
  ASSERT_TRUE(writer.Finish().ok());
  storage::MemEnv env;
  env.SetFile("/iq.gguf", bytes);
  absl::StatusOr<std::string> text = InspectModel(&env, "/iq.gguf", false);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("IQ2_XXS"));
  EXPECT_THAT(*text, HasSubstr("TQ1_0"));
  EXPECT_THAT(*text, HasSubstr("tokenizer     none"));
}

}  // namespace
}  // namespace waste::tools
