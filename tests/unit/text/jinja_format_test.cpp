// JavaScript number/string semantics the engine reproduces (number printing, parseInt/parseFloat,
// UTF-16 lengths, trimming) and JSON import (key order, whole numbers as ints).
#include <cmath>
#include <limits>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "text/jinja/error.h"
#include "text/jinja/js_number.h"
#include "text/jinja/js_string.h"
#include "text/jinja/value.h"
#include "text/jinja/value_format.h"

namespace beam::text::jinja {
namespace {

TEST(JsNumber, ToStringMatchesJavaScript) {
  EXPECT_EQ(js_number_to_string(0), "0");
  EXPECT_EQ(js_number_to_string(-0.0), "0");
  EXPECT_EQ(js_number_to_string(42), "42");
  EXPECT_EQ(js_number_to_string(-1.5), "-1.5");
  EXPECT_EQ(js_number_to_string(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(js_number_to_string(1e21), "1e+21");
  EXPECT_EQ(js_number_to_string(123456789012345680000.0), "123456789012345680000");
  EXPECT_EQ(js_number_to_string(1e-7), "1e-7");
  EXPECT_EQ(js_number_to_string(0.000001), "0.000001");
  EXPECT_EQ(js_number_to_string(1.5e-10), "1.5e-10");
  EXPECT_EQ(js_number_to_string(6.02e23), "6.02e+23");
  EXPECT_EQ(js_number_to_string(5e-324), "5e-324");
  EXPECT_EQ(js_number_to_string(std::numeric_limits<double>::infinity()), "Infinity");
  EXPECT_EQ(js_number_to_string(std::nan("")), "NaN");
}

TEST(JsNumber, FloatDisplayKeepsPointZero) {
  EXPECT_EQ(js_float_display(1.0), "1.0");
  EXPECT_EQ(js_float_display(-0.0), "-0.0");
  EXPECT_EQ(js_float_display(2.5), "2.5");
  EXPECT_EQ(js_float_display(1e20), "100000000000000000000.0");
  EXPECT_EQ(js_float_display(1e21), "1e+21");
}

TEST(JsNumber, ParseIntAndFloatTakeALeadingPrefix) {
  EXPECT_EQ(js_parse_int("  42abc"), 42);
  EXPECT_EQ(js_parse_int("-7.9"), -7);
  EXPECT_FALSE(js_parse_int("abc").has_value());
  EXPECT_EQ(js_parse_float("3.5e2x"), 350);
  EXPECT_EQ(js_parse_float(".5"), 0.5);
  EXPECT_EQ(js_parse_float("-Infinity"), -std::numeric_limits<double>::infinity());
  EXPECT_FALSE(js_parse_float("e5").has_value());
  EXPECT_EQ(js_string_to_number(" 12 "), 12);
  EXPECT_EQ(js_string_to_number(""), 0);
  EXPECT_EQ(js_string_to_number("0x1f"), 31);
  EXPECT_TRUE(std::isnan(js_string_to_number("12px")));
}

TEST(JsString, LengthsTrimAndCase) {
  EXPECT_EQ(utf16_length("a😀é"), 4u);
  EXPECT_EQ(js_trim("\u00a0\t x \u3000\n"), "x");
  EXPECT_EQ(js_trim_start("  x "), "x ");
  EXPECT_EQ(js_trim_end("  x \u2028"), "  x");
  EXPECT_EQ(js_to_upper("straße"), "STRASSE");
  EXPECT_EQ(js_to_lower("ÉCOLE"), "école");
  EXPECT_EQ(js_title_case("hello wORLD_x 2nd"), "Hello WORLD_x 2nd");
  EXPECT_EQ(js_capitalize("élan"), "Élan");
  std::string unit;
  ASSERT_TRUE(utf16_unit_at("a😀", -1, unit));
  EXPECT_EQ(unit, "\xEF\xBF\xBD");  // the low surrogate half of 😀: U+FFFD once encoded
  EXPECT_FALSE(utf16_unit_at("ab", 2, unit));
  // U+FF21 sorts after U+1F600 in UTF-16 (0xFF21 > 0xD83D), unlike in UTF-8 byte order.
  EXPECT_EQ(compare_utf16("\xEF\xBC\xA1", "😀"), 1);
  EXPECT_EQ(compare_utf16("ab", "abc"), -1);
}

TEST(JsString, InvalidUtf8DecodesAsReplacement) {
  size_t pos = 0;
  EXPECT_EQ(decode_utf8("\xC3", pos), 0xFFFDu);
  EXPECT_EQ(pos, 1u);
  pos = 0;
  EXPECT_EQ(decode_utf8("\xED\xA0\x80", pos), 0xFFFDu);  // an encoded surrogate
}

TEST(ValueJson, ImportKeepsOrderAndMakesWholeNumbersInts) {
  auto json = nlohmann::ordered_json::parse(R"({"z": 1, "a": 2.0, "m": [1.5, null, true, "s"], "big": 1e300})");
  Value v = value_from_json(json);
  ASSERT_TRUE(v.is_dict());
  const auto& items = v.as_dict().items();
  ASSERT_EQ(items.size(), 4u);
  EXPECT_EQ(items[0].first, "z");
  EXPECT_EQ(items[1].first, "a");
  EXPECT_TRUE(items[1].second.is(ValueKind::kInt));
  EXPECT_TRUE(items[2].second.as_list()[0].is(ValueKind::kFloat));
  EXPECT_EQ(to_json(v, JsonOptions{}, FormatLimits{}), R"({"z": 1, "a": 2, "m": [1.5, null, true, "s"], "big": 1e+300})");
}

TEST(ValueJson, DeepInputIsRefused) {
  std::string deep = std::string(600, '[') + std::string(600, ']');
  auto json = nlohmann::ordered_json::parse(deep);
  EXPECT_THROW(value_from_json(json), TemplateError);
}

TEST(DictValue, OverwriteKeepsPositionAndLargeDictsIndex) {
  Dict d;
  for (int i = 0; i < 40; ++i) d.set("k" + std::to_string(i), Value::integer(i));
  d.set("k3", Value::string("x"));
  EXPECT_EQ(d.size(), 40u);
  EXPECT_EQ(d.items()[3].second.as_string(), "x");
  ASSERT_NE(d.find("k39"), nullptr);
  EXPECT_EQ(d.find("k39")->as_number(), 39);
  EXPECT_EQ(d.find("nope"), nullptr);
}

}  // namespace
}  // namespace beam::text::jinja
