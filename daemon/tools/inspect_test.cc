#include "daemon/tools/inspect.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_split.h"
#include "daemon/tools/mkmodel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/mem_env.h"
#include "tests/subprocess.h"
#include "tests/testdata.h"

namespace waste::tools {
namespace {

using ::testing::HasSubstr;

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
}

// The real binary: `wasted mkmodel` then `wasted inspect`, and the exit
// codes and one-line error a script sees.
TEST(InspectBinaryTest, MkmodelThenInspect) {
  const std::string wasted = waste::testing::RunfilePath("daemon/wasted");
  const std::string out = waste::testing::TempDir() + "/m.gguf";
  waste::testing::CommandResult made =
      waste::testing::RunCommand({wasted, "mkmodel", "--arch", "qwen3moe", "--out", out, "--dim",
                                  "128", "--layers", "2", "--type", "q4_0"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_THAT(made.out, HasSubstr("wrote"));

  waste::testing::CommandResult inspected =
      waste::testing::RunCommand({wasted, "inspect", out, "--json"});
  ASSERT_EQ(inspected.exit_code, 0) << inspected.err;
  EXPECT_THAT(inspected.out, HasSubstr("\"architecture\": \"qwen3moe\""));
  EXPECT_THAT(inspected.out, HasSubstr("\"Q4_0\""));

  waste::testing::CommandResult stories =
      waste::testing::RunCommand({wasted, "inspect", Stories()});
  ASSERT_EQ(stories.exit_code, 0) << stories.err;
  EXPECT_THAT(stories.out, HasSubstr("llama"));

  waste::testing::CommandResult bad = waste::testing::RunCommand({wasted, "inspect", BadFile()});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(bad.out.empty());
  EXPECT_THAT(bad.err, HasSubstr("wasted inspect: "));
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;

  waste::testing::CommandResult usage = waste::testing::RunCommand({wasted, "mkmodel"});
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_THAT(usage.err, HasSubstr("--out"));
}

}  // namespace
}  // namespace waste::tools
