// parse_bounded_json: values as nlohmann parses them, syntax errors named, and its limits: nesting
// past kMaxJsonDepth and key inserts past kMaxJsonKeyWork are refused (a 60,000-deep body
// overflowed a request thread's stack when copied; 100,000 keys in one object took 8.8 s).
#include "server/parsers/bounded_json.h"

#include <gtest/gtest.h>

#include <string>

namespace beam::server {
namespace {

std::string nested(int depth, char open, char close) {
  return std::string(static_cast<size_t>(depth), open) +
         std::string(static_cast<size_t>(depth), close);
}

std::string object_of_keys(int64_t keys, const std::string& prefix = "k") {
  std::string text = "{";
  for (int64_t i = 0; i < keys; ++i)
    text += (i ? ",\"" : "\"") + prefix + std::to_string(i) + "\":" + std::to_string(i);
  return text + "}";
}

TEST(BoundedJson, ParsesAsNlohmannKeepingKeyOrder) {
  const auto v = parse_bounded_json(R"({"b": [1, {"c": null}], "a": "x"})");
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ(v->dump(), R"({"b":[1,{"c":null}],"a":"x"})");
  const auto bad = parse_bounded_json("{\"a\": }");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message.rfind("not valid JSON: [json.exception.parse_error.101]", 0), 0u)
      << bad.error().message;
}

TEST(BoundedJson, RefusesNestingPastTheLimit) {
  EXPECT_TRUE(parse_bounded_json(nested(kMaxJsonDepth, '[', ']')).ok());
  EXPECT_TRUE(parse_bounded_json("{\"a\":" + nested(kMaxJsonDepth - 1, '[', ']') + "}").ok());
  for (const std::string& text : {nested(kMaxJsonDepth + 1, '[', ']'), std::string(60'000, '['),
                                  "{\"default\":" + nested(60'000, '[', ']') + "}"}) {
    const auto v = parse_bounded_json(text);
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.error().message, "refused: it nests arrays and objects more than 512 deep");
  }
}

TEST(BoundedJson, RefusesKeyWorkPastTheLimit) {
  EXPECT_TRUE(parse_bounded_json(object_of_keys(kMaxJsonObjectKeys)).ok());
  const std::string refused =
      "refused: its objects hold too many keys (more than 10000 in one object, or as many key "
      "comparisons in several)";
  const auto one = parse_bounded_json(object_of_keys(kMaxJsonObjectKeys + 2));
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.error().message, refused);
  // Many objects of 2,000 keys: each is fine alone; their work together is what is bounded.
  std::string many = "[";
  for (int i = 0; i < 30; ++i) many += (i ? "," : "") + object_of_keys(2000);
  many += "]";
  const auto several = parse_bounded_json(many);
  ASSERT_FALSE(several.ok());
  EXPECT_EQ(several.error().message, refused);
  // Arrays cost no key work: 200,000 elements parse.
  std::string long_array = "[0";
  for (int i = 1; i < 200'000; ++i) long_array += ",0";
  EXPECT_TRUE(parse_bounded_json(long_array + "]").ok());
}

}  // namespace
}  // namespace beam::server
