// Python str semantics used by content parsers: strip(), int(), float(), truthiness, UTF-8.
#include "server/parsers/python_text.h"

#include <gtest/gtest.h>

#include <cmath>

namespace beam::server {
namespace {

TEST(PythonText, StripRemovesUnicodeWhitespaceOnly) {
  EXPECT_EQ(py_strip(" \x1c\xc2\x85\xc2\xa0\xe3\x80\x80"
                     "a\xe2\x80\x8b \n"),
            "a\xe2\x80\x8b");  // U+200B is not space
  EXPECT_EQ(py_strip("\t\n\v\f\r "), "");
  EXPECT_EQ(py_strip("x"), "x");
  EXPECT_TRUE(py_isspace(0x2028) && py_isspace(0x205F) && !py_isspace(0x200B) &&
              !py_isspace(0xFEFF));
}

TEST(PythonText, IntFollowsPythonSyntax) {
  EXPECT_EQ(*py_int(" 1_000 "), 1000);
  EXPECT_EQ(*py_int("+7"), 7);
  EXPECT_EQ(*py_int("-0042"), -42);
  EXPECT_EQ(*py_int("-9223372036854775808"), INT64_MIN);
  EXPECT_TRUE(py_int("18446744073709551615")->is_number_unsigned());
  for (const char* bad :
       {"1__0", "_1", "1_", "0x10", "+-1", "1 2", "", "4.2", "1e3", "18446744073709551616"}) {
    EXPECT_FALSE(py_int(bad).has_value()) << bad;
  }
}

TEST(PythonText, FloatFollowsPythonSyntax) {
  EXPECT_EQ(*py_float(" 1_0.5e1_0 "), 105000000000.0);
  EXPECT_EQ(*py_float(".5"), 0.5);
  EXPECT_EQ(*py_float("5."), 5.0);
  EXPECT_EQ(*py_float("-1E-3"), -0.001);
  EXPECT_TRUE(std::isinf(*py_float("iNf")) && std::isinf(*py_float("-Infinity")));
  EXPECT_TRUE(std::isnan(*py_float("nan")));
  EXPECT_TRUE(std::isinf(*py_float("1e400")));
  EXPECT_EQ(*py_float("1e-400"), 0.0);
  for (const char* bad : {"1._5", "1_.5", "e5", "1e", "1e5_", "in f", "", ".", "0x1p3"}) {
    EXPECT_FALSE(py_float(bad).has_value()) << bad;
  }
}

TEST(PythonText, JsonLoadsAndTruthiness) {
  EXPECT_EQ(*py_json_loads(" {\"a\": [1, 2.5]} "), Json::parse(R"({"a": [1, 2.5]})"));
  EXPECT_TRUE(py_json_loads("1.0")->is_number_float());
  EXPECT_FALSE(py_json_loads("{'a': 1}").has_value());
  EXPECT_FALSE(py_json_loads("[1] x").has_value());
  EXPECT_FALSE(py_json_loads("").has_value());
  for (const char* falsy : {"null", "false", "0", "0.0", "\"\"", "[]", "{}"})
    EXPECT_FALSE(py_truthy(Json::parse(falsy))) << falsy;
  for (const char* truthy : {"true", "-1", "0.5", "\"0\"", "[0]", "{\"a\": null}"})
    EXPECT_TRUE(py_truthy(Json::parse(truthy))) << truthy;
}

TEST(PythonText, Utf8Boundaries) {
  EXPECT_EQ(utf8_complete_prefix_bytes("ab\xe6\x97"), 2u);
  EXPECT_EQ(utf8_complete_prefix_bytes("ab\xe6\x97\xa5"), 5u);
  EXPECT_EQ(utf8_complete_prefix_bytes("\xf0\x9f\x99"), 0u);
  EXPECT_EQ(utf8_complete_prefix_bytes("a\xff"), 2u);  // invalid, not incomplete
  EXPECT_EQ(utf8_length("日本🙂a"), 4u);
  std::string out;
  append_valid_utf8(&out,
                    "ok\xc0\xaf\xf4\x90\x80\x80\xe2\x82\xac");  // overlong, > U+10FFFF, then €
  EXPECT_EQ(
      out,
      "ok\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xE2\x82\xAC");
}

}  // namespace
}  // namespace beam::server
