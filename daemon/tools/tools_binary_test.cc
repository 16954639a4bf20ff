#include <algorithm>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"
#include "tests/testdata.h"

namespace waste::tools {
namespace {

using ::testing::HasSubstr;

std::string Stories() { return waste::testing::ModelPath("stories260K/stories260K.gguf"); }
std::string BadFile() {
  return waste::testing::ModelPath("gguf-conformance/test_writer.nonstandard-kvtype13.gguf");
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
