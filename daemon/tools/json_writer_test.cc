#include "daemon/tools/json_writer.h"

#include "gtest/gtest.h"

namespace waste::tools {
namespace {

TEST(JsonWriterTest, NestsAndEscapes) {
  JsonWriter json;
  json.BeginObject();
  json.Key("name");
  json.String("a \"b\"\\\n\x01");
  json.Key("list");
  json.BeginArray();
  json.Int(-3);
  json.Uint(18446744073709551615u);
  json.Double(0.5);
  json.Bool(true);
  json.Null();
  json.EndArray();
  json.Key("empty");
  json.BeginObject();
  json.EndObject();
  json.EndObject();
  EXPECT_EQ(json.str(),
            "{\n"
            "  \"name\": \"a \\\"b\\\"\\\\\\n\\u0001\",\n"
            "  \"list\": [\n"
            "    -3,\n"
            "    18446744073709551615,\n"
            "    0.5,\n"
            "    true,\n"
            "    null\n"
            "  ],\n"
            "  \"empty\": {}\n"
            "}");
}

TEST(JsonWriterTest, NonFiniteIsNull) {
  JsonWriter json;
  json.BeginArray();
  json.Double(1.0 / 0.0);
  json.EndArray();
  EXPECT_EQ(json.str(), "[\n  null\n]");
}

}  // namespace
}  // namespace waste::tools
