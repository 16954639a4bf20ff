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

// json.dumps(x, indent=4, ensure_ascii=False), as tojson(indent=4) writes it
// (checked with Python 3.11).
TEST(PythonJsonTest, IndentsAsPythonDoes) {
  const auto json = nlohmann::ordered_json::parse(
      R"({"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{},)"
      R"("required":["a","b"]},"e":[]},"n":[1,{"k":"é"}]})");
  EXPECT_EQ(PythonJson(json, 4),
            "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"f\",\n"
            "        \"parameters\": {\n            \"type\": \"object\",\n            "
            "\"properties\": {},\n            \"required\": [\n                \"a\",\n"
            "                \"b\"\n            ]\n        },\n        \"e\": []\n    },\n"
            "    \"n\": [\n        1,\n        {\n            \"k\": \"é\"\n        }\n    ]\n}");
  EXPECT_EQ(PythonJson(nlohmann::ordered_json::parse("[]"), 4), "[]");
  EXPECT_EQ(PythonJson(nlohmann::ordered_json::parse("3"), 4), "3");
}

}  // namespace
}  // namespace waste
