#include "common/python_json.h"

#include "gtest/gtest.h"

namespace waste {
namespace {

// As Python's json.dumps(x, ensure_ascii=False) writes them (checked with
// Python 3.11).
TEST(PythonJsonTest, WritesAsPythonDoes) {
  EXPECT_EQ(PythonJsonFromText(R"({"b":1,"a":[1,2.5,true,null],"c":{"d":"x"}})"),
            R"({"b": 1, "a": [1, 2.5, true, null], "c": {"d": "x"}})");
  EXPECT_EQ(PythonJsonFromText(R"("tab\t \"q\" back\\ \u0001 °C 日本 /")"),
            R"("tab\t \"q\" back\\ \u0001 °C 日本 /")");
  EXPECT_EQ(PythonJsonFromText("{}"), "{}");
  EXPECT_EQ(PythonJsonFromText("[]"), "[]");
  EXPECT_EQ(PythonJsonFromText("[[], {}]"), "[[], {}]");
  EXPECT_EQ(PythonJsonFromText("-3"), "-3");
  EXPECT_EQ(PythonJsonFromText("not json"), "null");
}

}  // namespace
}  // namespace waste
