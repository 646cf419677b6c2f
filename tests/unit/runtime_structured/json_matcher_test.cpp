// JsonMatcher against nlohmann's parser (any JSON) and against hand-checked schema cases.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>

#include "structured_test_util.h"

namespace beam {
namespace {

using testing::grammar_of;
using testing::matches;
using Json = nlohmann::ordered_json;

JsonMatcher any_value_matcher() {
  return JsonMatcher(testing::grammar_of("{}"));
}

TEST(JsonMatcher, AcceptsJsonTextsOfAnyValue) {
  const JsonMatcher m = any_value_matcher();
  for (const char* text :
       {"0", "-0", "12", "-3.25e+10", "1E5", "true", "false", "null", "\"\"",
        "\"a\\\"b\\\\c\\u00e9\\n\"", "[]", "[1,[2,[3]]]", "{}", "{\"a\":{\"b\":[true,null,\"x\"]}}",
        " { \"k\" : [ 1 , 2 ] }", "\"caf\xc3\xa9\""}) {
    EXPECT_TRUE(matches(m, text, true)) << text;
  }
}

TEST(JsonMatcher, RejectsWhatJsonForbids) {
  const JsonMatcher m = any_value_matcher();
  for (const char* text :
       {"01",          "-",        "1.",    ".5",      "1e",       "+1",         "tru e", "nul",
        "[1,]",        "[,1]",     "{,}",   "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{a:1}", "\"\\x\"",
        "\"\\u12g4\"", "\"a\nb\"", "[1 2]", "{}{}",    "1 ",       "'a'"}) {
    EXPECT_FALSE(matches(m, text, true)) << text;
  }
  // Prefixes of valid text are alive but not complete.
  EXPECT_TRUE(matches(m, "{\"a\":[1,", false));
  EXPECT_FALSE(matches(m, "{\"a\":[1,", true));
  EXPECT_TRUE(matches(m, "-", false));
  EXPECT_TRUE(matches(m, "1", true));  // a number may end at the end of the output
}

// Random values printed compact and indented must be accepted; random one-byte edits of them are
// accepted only when nlohmann accepts the result too (the matcher never lets invalid JSON out).
TEST(JsonMatcher, AgreesWithNlohmannOnRandomDocumentsAndEdits) {
  std::mt19937 rng(7);
  auto random_value = [&](auto& self, int depth) -> Json {
    switch (std::uniform_int_distribution<int>(0, depth > 3 ? 4 : 6)(rng)) {
      case 0:
        return Json(std::uniform_int_distribution<int>(-1000, 1000)(rng));
      case 1:
        return Json(std::uniform_real_distribution<double>(-1e3, 1e3)(rng));
      case 2: {
        const char* texts[] = {"", "s", "a\"b", "\\", "\t", "\xc3\xa9", "x y"};
        return Json(texts[rng() % 7]);
      }
      case 3:
        return Json(rng() % 2 == 0);
      case 4:
        return Json(nullptr);
      case 5: {
        Json a = Json::array();
        for (int i = 0, n = static_cast<int>(rng() % 4); i < n; ++i)
          a.push_back(self(self, depth + 1));
        return a;
      }
      default: {
        Json o = Json::object();
        for (int i = 0, n = static_cast<int>(rng() % 4); i < n; ++i)
          o["k" + std::to_string(i)] = self(self, depth + 1);
        return o;
      }
    }
  };
  const JsonMatcher m = any_value_matcher();
  const std::string alphabet = "{}[]\",:0123456789-.eE \ntfnulrsa\\";
  for (int i = 0; i < 300; ++i) {
    const Json v = random_value(random_value, 0);
    for (const std::string& text : {v.dump(), v.dump(2)}) {
      ASSERT_TRUE(matches(m, text, true)) << text;
      std::string edited = text;
      const size_t at = rng() % edited.size();
      if (rng() % 2 == 0) {
        edited.erase(at, 1);
      } else {
        edited.insert(at, 1, alphabet[rng() % alphabet.size()]);
      }
      if (matches(m, edited, true)) {
        EXPECT_TRUE(Json::accept(edited)) << edited;
      }
    }
  }
}

TEST(JsonMatcher, StringsHoldValidUtf8Only) {
  const JsonMatcher m = any_value_matcher();
  for (const char* ok :
       {"\"\xc3\xa9\"", "\"\xe2\x82\xac\"", "\"\xf0\x9f\x98\x80\"", "\"\xed\x9f\xbf\""})
    EXPECT_TRUE(matches(m, ok, true)) << ok;
  for (const char* bad :
       {"\"\xa9\"", "\"\xc3\"", "\"\xc0\x80\"", "\"\xe0\x80\x80\"", "\"\xed\xa0\x80\"",
        "\"\xf4\x90\x80\x80\"", "\"\xf5\x80\x80\x80\"", "\"\xff\""})
    EXPECT_FALSE(matches(m, bad, true)) << bad;
}

TEST(JsonMatcher, ObjectsFollowTheSchemasPropertiesInOrder) {
  const JsonMatcher m(grammar_of(R"({"type":"object","properties":{
      "name":{"type":"string"},"age":{"type":"integer"},
      "tags":{"type":"array","items":{"type":"string"}}},
      "required":["name","tags"]})"));
  EXPECT_TRUE(matches(m, R"({"name":"a","age":3,"tags":[]})", true));
  EXPECT_TRUE(matches(m, R"({"name":"a","tags":["x","y"]})", true));  // optional age skipped
  EXPECT_TRUE(matches(m, R"({ "name" : "a" , "tags" : [ ] })", true));
  EXPECT_FALSE(matches(m, R"({"age":3,"name":"a","tags":[]})", true));    // out of order
  EXPECT_FALSE(matches(m, R"({"name":"a"})", true));                      // tags required
  EXPECT_FALSE(matches(m, R"({"name":"a","tags":[],"x":1})", true));      // no extra keys
  EXPECT_FALSE(matches(m, R"({"name":"a","age":3.5,"tags":[]})", true));  // integer
  EXPECT_FALSE(matches(m, R"({"name":1,"tags":[]})", true));
  EXPECT_FALSE(matches(m, R"({"tags":[]})", true));  // name is required and comes first
}

TEST(JsonMatcher, ExtraKeysOnlyWhereAdditionalPropertiesAllowsThem) {
  const JsonMatcher m(grammar_of(R"({"type":"object","properties":{"a":{"type":"integer"}},
      "additionalProperties":{"type":"boolean"}})"));
  EXPECT_TRUE(matches(m, R"({"a":1,"b":true,"c":false})", true));
  EXPECT_TRUE(matches(m, R"({"b":true})", true));
  EXPECT_FALSE(matches(m, R"({"a":1,"b":1})", true));
  const JsonMatcher any_object(JsonGrammar::any_object());
  EXPECT_TRUE(matches(any_object, R"({"x":[1,{"y":null}],"z":"w"})", true));
  EXPECT_FALSE(matches(any_object, R"([1])", true));
  EXPECT_FALSE(matches(any_object, R"("s")", true));
}

TEST(JsonMatcher, EnumsConstsAndAlternatives) {
  const JsonMatcher colors(grammar_of(R"({"enum":["red","green",1,12,null]})"));
  for (const char* ok : {"\"red\"", "\"green\"", "1", "12", "null"})
    EXPECT_TRUE(matches(colors, ok, true)) << ok;
  for (const char* bad : {"\"blue\"", "\"re\"", "2", "123", "true"})
    EXPECT_FALSE(matches(colors, bad, true)) << bad;
  const JsonMatcher maybe(grammar_of(R"({"anyOf":[{"type":"string"},{"type":"null"}]})"));
  EXPECT_TRUE(matches(maybe, "\"x\"", true));
  EXPECT_TRUE(matches(maybe, "null", true));
  EXPECT_FALSE(matches(maybe, "1", true));
  const JsonMatcher types(grammar_of(R"({"type":["integer","boolean"]})"));
  EXPECT_TRUE(matches(types, "7", true));
  EXPECT_TRUE(matches(types, "false", true));
  EXPECT_FALSE(matches(types, "7.5", true));
  const JsonMatcher shapes(grammar_of(R"({"oneOf":[
      {"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number"}},
       "required":["kind","r"]},
      {"type":"object","properties":{"kind":{"const":"square"},"side":{"type":"number"}},
       "required":["kind","side"]}]})"));
  EXPECT_TRUE(matches(shapes, R"({"kind":"circle","r":2})", true));
  EXPECT_TRUE(matches(shapes, R"({"kind":"square","side":2})", true));
  EXPECT_FALSE(matches(shapes, R"({"kind":"circle","side":2})", true));
}

// anyOf alternatives shared through $refs start once each, not once per path: a chain of 40
// anyOfs, each of one $ref twice, has 2^40 paths to its string (depth 20 took 24 s a mask).
TEST(JsonMatcher, SharedAlternativesStartOnce) {
  std::string defs;
  for (int i = 0; i < 40; ++i) {
    const std::string next = "{\"$ref\":\"#/$defs/a" + std::to_string(i + 1) + "\"}";
    defs += "\"a" + std::to_string(i) + "\":{\"anyOf\":[" + next + "," + next + "," +
            (i == 20 ? std::string("{\"type\":\"null\"}") : next) + "]},";
  }
  const JsonMatcher m(grammar_of("{\"$defs\":{" + defs +
                                 "\"a40\":{\"type\":\"string\"}},\"$ref\":\"#/$defs/a0\"}"));
  MatchState state = m.initial(), scratch;
  ASSERT_TRUE(m.advance_bytes(state, "\"", scratch));
  EXPECT_EQ(state.num_stacks(), 1u);
  EXPECT_TRUE(matches(m, "\"deep\"", true));
  EXPECT_TRUE(matches(m, "null", true));
  EXPECT_FALSE(matches(m, "1", true));
}

// Stacks that converge are merged exactly, whether few (compared pairwise) or many (by hash): an
// enum of 30,000 strings keeps one stack per value its prefix still fits.
TEST(JsonMatcher, ManyForkedStacksDedupeExactly) {
  std::string values;
  for (int i = 0; i < 30000; ++i) values += (i ? ",\"a" : "\"a") + std::to_string(i) + "\"";
  const JsonMatcher m(grammar_of("{\"enum\":[" + values + ",\"a1\"]}"));
  MatchState state = m.initial(), scratch;
  ASSERT_TRUE(m.advance_bytes(state, "\"a", scratch));
  EXPECT_EQ(state.num_stacks(), 30000u);
  ASSERT_TRUE(m.advance_bytes(state, "1", scratch));  // a1, a10-a19, a100-a199, ... a10000-a19999
  EXPECT_EQ(state.num_stacks(), 1u + 10 + 100 + 1000 + 10000);
  ASSERT_TRUE(m.advance_bytes(state, "2345\"", scratch));
  EXPECT_TRUE(m.can_end(state));
  EXPECT_FALSE(matches(m, "\"a30000\"", true));

  // A flat anyOf of as many consts starts each once (no search among them: quadratic in them).
  std::string consts;
  for (int i = 0; i < 30000; ++i)
    consts += (i ? ",{\"const\":\"a" : "{\"const\":\"a") + std::to_string(i) + "\"}";
  const JsonMatcher any(grammar_of("{\"anyOf\":[" + consts + "]}"));
  MatchState s = any.initial();
  ASSERT_TRUE(any.advance_bytes(s, "\"a1", scratch));
  EXPECT_EQ(s.num_stacks(), 1u + 10 + 100 + 1000 + 10000);
}

TEST(JsonMatcher, ArraysAndStringsKeepTheirBounds) {
  const JsonMatcher arr(
      grammar_of(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":2})"));
  EXPECT_FALSE(matches(arr, "[]", true));
  EXPECT_TRUE(matches(arr, "[1]", true));
  EXPECT_TRUE(matches(arr, "[1,2]", true));
  EXPECT_FALSE(matches(arr, "[1,2,", false));
  const JsonMatcher tuple(grammar_of(
      R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})"));
  EXPECT_TRUE(matches(tuple, R"(["a",1])", true));
  EXPECT_TRUE(matches(tuple, R"(["a"])", true));
  EXPECT_FALSE(matches(tuple, R"(["a",1,2])", true));
  EXPECT_FALSE(matches(tuple, R"([1])", true));
  const JsonMatcher str(grammar_of(R"({"type":"string","minLength":2,"maxLength":3})"));
  EXPECT_FALSE(matches(str, "\"a\"", true));
  EXPECT_TRUE(matches(str, "\"ab\"", true));
  EXPECT_TRUE(matches(str, "\"\xc3\xa9\xc3\xa9\xc3\xa9\"", true));  // three code points
  EXPECT_TRUE(matches(str, "\"a\\nb\"", true));                     // an escape is one
  EXPECT_FALSE(matches(str, "\"abcd", false));
}

TEST(JsonMatcher, StringsMatchTheirPattern) {
  const JsonMatcher code(grammar_of(R"({"type":"string","pattern":"^[a-z]+-\\d{2}$"})"));
  EXPECT_TRUE(matches(code, R"("ab-12")", true));
  EXPECT_FALSE(matches(code, R"("ab-1")", true));
  EXPECT_TRUE(matches(code, R"("ab-1)", false));  // may still close after one more digit
  EXPECT_FALSE(matches(code, R"("AB)", false));
  EXPECT_FALSE(matches(code, R"("ab-123)", false));
  // The value is matched, escapes decoded; a \u escape is refused in a patterned string.
  const JsonMatcher escaped(grammar_of(R"({"type":"string","pattern":"^a\nb\"$"})"));
  EXPECT_TRUE(matches(escaped, R"("a\nb\"")", true));
  EXPECT_FALSE(matches(escaped, R"("a\u000ab\"")", false));
  // Unanchored: the match may be anywhere in the value.
  const JsonMatcher anywhere(grammar_of(R"({"type":"string","pattern":"x"})"));
  EXPECT_TRUE(matches(anywhere, R"("axb")", true));
  EXPECT_FALSE(matches(anywhere, R"("ab")", true));
  EXPECT_TRUE(matches(anywhere, R"("ab)", false));
  // With a length range both hold; object keys and other strings are not affected.
  const JsonMatcher both(grammar_of(R"({"type":"object","properties":{
      "k":{"type":["string","null"],"pattern":"^a*$","maxLength":3}}})"));
  EXPECT_TRUE(matches(both, R"({"k":"aaa"})", true));
  EXPECT_FALSE(matches(both, R"({"k":"aaaa)", false));
  EXPECT_FALSE(matches(both, R"({"k":"ab)", false));
  EXPECT_TRUE(matches(both, R"({"k":null})", true));
  EXPECT_NE(testing::schema_error(R"j({"properties":{"p":{"type":"string","pattern":"(?=x)"}}})j")
                .find("/properties/p/pattern: lookaround"),
            std::string::npos);
  EXPECT_NE(testing::schema_error(R"({"type":"string","pattern":7})").find("/pattern"),
            std::string::npos);
  EXPECT_NE(testing::schema_error(R"({"anyOf":[{"type":"string"}],"pattern":"a"})")
                .find("beside \"pattern\""),
            std::string::npos);
  // A schema's patterns share one build budget (200 patterns of 30 ms each took 6.8 s), and
  // their automata at most kMaxSharedTableBytes (300 of ~4 MB each held 1.1 GB).
  std::string slow = R"({"type":"object","properties":{)";
  for (int i = 0; i < 200; ++i)
    slow += (i ? "," : "") + std::string("\"p") + std::to_string(i) +
            R"(":{"type":"string","pattern":"^(([a-z]?){30}){30})" + std::to_string(i) + "$\"}";
  EXPECT_NE(
      testing::schema_error(slow + "}}")
          .find("pattern: the regular expression is too complex (the regular expressions together "
                "take more than 100000000 steps to build)"),
      std::string::npos)
      << testing::schema_error(slow + "}}");
  // No dead ends: a backslash only where some escape can follow, and no byte after which the
  // pattern needs more code points than maxLength leaves.
  const JsonMatcher letters(grammar_of(R"({"type":"string","pattern":"^[A-Z]+$"})"));
  EXPECT_FALSE(matches(letters, R"("A\)", false));
  const JsonMatcher tight(grammar_of(R"({"type":"string","pattern":"^a+b$","maxLength":3})"));
  EXPECT_TRUE(matches(tight, R"("aab")", true));
  EXPECT_TRUE(matches(tight, R"("aa)", false));
  EXPECT_FALSE(matches(tight, R"("aaa)", false));
  const JsonMatcher wide(grammar_of(R"({"type":"string","pattern":"^é+x$","maxLength":2})"));
  EXPECT_TRUE(matches(wide, "\"\xc3\xa9", false));  // two bytes, one code point
  EXPECT_TRUE(matches(wide, "\"\xc3\xa9x\"", true));
  EXPECT_FALSE(matches(wide, "\"\xc3\xa9\xc3\xa9", false));
  // Without "type", a pattern makes a string schema.
  const JsonMatcher untyped(grammar_of(R"({"pattern":"^\\d$"})"));
  EXPECT_TRUE(matches(untyped, R"("7")", true));
  EXPECT_FALSE(matches(untyped, "7", false));
}

TEST(JsonMatcher, IntegersKeepTheirBounds) {
  const JsonMatcher range(grammar_of(R"({"type":"integer","minimum":-5,"maximum":120})"));
  for (const char* ok : {"-5", "0", "-0", "7", "120", "99"})
    EXPECT_TRUE(matches(range, ok, true)) << ok;
  for (const char* bad : {"-6", "121", "1000", "-10", "130"})
    EXPECT_FALSE(matches(range, bad, true)) << bad;
  EXPECT_TRUE(matches(range, "12", false));  // 12, or 120 next
  EXPECT_FALSE(matches(range, "13", false) && !matches(range, "13", true));
  EXPECT_FALSE(matches(range, "-6", false));  // no continuation of -6 is in range
  const JsonMatcher positive(grammar_of(R"({"type":"integer","exclusiveMinimum":0})"));
  EXPECT_FALSE(matches(positive, "0", true));
  EXPECT_FALSE(matches(positive, "-", false));
  EXPECT_TRUE(matches(positive, "12345678901234", true));  // past 2^31: saturated, still above 0
  const JsonMatcher at_most(grammar_of(R"({"type":"integer","exclusiveMaximum":10.5})"));
  EXPECT_TRUE(matches(at_most, "10", true));
  EXPECT_FALSE(matches(at_most, "11", true));
  EXPECT_TRUE(matches(at_most, "-99999999999", true));
  EXPECT_NE(testing::schema_error(R"({"type":"integer","minimum":3,"maximum":2})").find("no value"),
            std::string::npos);
  EXPECT_NE(testing::schema_error(R"({"type":"integer","maximum":1e10})").find("2^31"),
            std::string::npos);
}

TEST(JsonMatcher, NumbersKeepWholeBounds) {
  const JsonMatcher unit(grammar_of(R"({"type":"number","minimum":0,"maximum":1})"));
  for (const char* ok : {"0", "1", "0.5", "1.0", "1.000", "0.999", "-0"})
    EXPECT_TRUE(matches(unit, ok, true)) << ok;
  for (const char* bad : {"1.5", "-0.1", "2", "1.01", "1e0", "0.5e-1", "10"})
    EXPECT_FALSE(matches(unit, bad, true)) << bad;
  EXPECT_TRUE(matches(unit, "1.", false));
  EXPECT_FALSE(matches(unit, "1.0001", false));  // dead at its 1
  const JsonMatcher positive(grammar_of(R"({"type":"number","exclusiveMinimum":0})"));
  for (const char* bad : {"0", "0.0", "-1", "-0.5"})
    EXPECT_FALSE(matches(positive, bad, true)) << bad;
  EXPECT_TRUE(matches(positive, "0.001", true));
  EXPECT_TRUE(matches(positive, "0.00", false));  // alive: a nonzero digit may follow
  EXPECT_TRUE(matches(positive, "123456789012.5", true));
  const JsonMatcher below(grammar_of(R"({"type":"number","minimum":-2,"exclusiveMaximum":1})"));
  for (const char* ok : {"-2", "-2.0", "-1.5", "0.999", "0"})
    EXPECT_TRUE(matches(below, ok, true)) << ok;
  for (const char* bad : {"-2.5", "1", "1.0", "-3"}) EXPECT_FALSE(matches(below, bad, true)) << bad;
  EXPECT_NE(testing::schema_error(R"({"type":"number","minimum":1,"exclusiveMaximum":1})")
                .find("no value"),
            std::string::npos);
  EXPECT_NE(testing::schema_error(R"({"minimum":1})").find("needs"), std::string::npos);
}

// A number string's exact value in units of 10^-6 (at most 6 decimals), or nullopt when it is not
// a JSON number of that shape.
std::optional<int64_t> micro_units(const std::string& text) {
  static const std::regex kNumber(R"(-?(0|[1-9][0-9]{0,5})(\.[0-9]{1,6})?)");
  if (!std::regex_match(text, kNumber)) return std::nullopt;
  const bool negative = text[0] == '-';
  const size_t dot = text.find('.');
  const std::string int_part =
      text.substr(negative, dot == std::string::npos ? std::string::npos : dot - negative);
  std::string frac = dot == std::string::npos ? "" : text.substr(dot + 1);
  frac.resize(6, '0');
  const int64_t v = std::stoll(int_part) * 1000000 + std::stoll(frac);
  return negative ? -v : v;
}

// Every string of up to 5 bytes over digits, '-' and '.', against exact decimal arithmetic:
// complete exactly when it is a number inside the bounds; alive exactly when some continuation
// completes (checked as: complete texts' prefixes are alive, and every alive text of up to 4
// bytes completes within 4 more).
TEST(JsonMatcher, FractionalBoundsAgreeWithExactDecimals) {
  struct Case {
    const char* schema;
    int64_t lo, hi;  // micro-units
    bool lo_open, hi_open;
  };
  const Case cases[] = {
      {R"({"type":"number","minimum":0.25,"maximum":1.5})", 250000, 1500000, false, false},
      {R"({"type":"number","exclusiveMinimum":-0.5,"exclusiveMaximum":0.75})", -500000, 750000,
       true, true},
      {R"({"type":"number","minimum":-2.125,"exclusiveMaximum":-1.1})", -2125000, -1100000, false,
       true},
      {R"({"type":"number","exclusiveMinimum":0.001,"maximum":0.002})", 1000, 2000, true, false},
  };
  const std::string alphabet = "0123456789-.";
  for (const Case& c : cases) {
    SCOPED_TRACE(c.schema);
    const JsonMatcher m(grammar_of(c.schema));
    auto inside = [&](int64_t v) {
      return (c.lo_open ? v > c.lo : v >= c.lo) && (c.hi_open ? v < c.hi : v <= c.hi);
    };
    std::vector<std::string> texts = {""};
    for (size_t i = 0; i < texts.size(); ++i) {
      if (texts[i].size() == 5) continue;
      for (char ch : alphabet) texts.push_back(texts[i] + ch);
    }
    std::set<std::string> alive;
    for (const std::string& t : texts) {
      if (t.empty()) continue;
      const std::optional<int64_t> v = micro_units(t);
      const bool complete = v && inside(*v);
      EXPECT_EQ(matches(m, t, true), complete) << t;
      if (complete) {
        for (size_t n = 1; n <= t.size(); ++n) EXPECT_TRUE(matches(m, t.substr(0, n), false)) << t;
      }
      if (t.size() <= 4 && matches(m, t, false)) alive.insert(t);
    }
    // A completion within 4 more bytes, searched along the matcher's live texts and checked
    // exactly.
    auto completes = [&](auto& self, const std::string& t, int more) -> bool {
      const std::optional<int64_t> v = micro_units(t);
      if (v && inside(*v)) return true;
      if (more == 0) return false;
      for (char ch : alphabet) {
        if (matches(m, t + ch, false) && self(self, t + ch, more - 1)) return true;
      }
      return false;
    };
    for (const std::string& t : alive)
      EXPECT_TRUE(completes(completes, t, 4)) << "alive but no completion: " << t;
  }
}

TEST(JsonMatcher, NumberBoundsRefusedPastSixDecimalsOrTheRange) {
  const JsonMatcher tiny(
      grammar_of(R"({"type":"number","exclusiveMinimum":0,"maximum":0.000001})"));
  EXPECT_TRUE(matches(tiny, "0.000001", true));
  EXPECT_TRUE(matches(tiny, "0.0000005", true));
  EXPECT_FALSE(matches(tiny, "0.0000011", true));
  EXPECT_FALSE(matches(tiny, "0.000002", false));
  EXPECT_NE(testing::schema_error(R"({"type":"number","maximum":0.0000001})").find("6 decimals"),
            std::string::npos);
  EXPECT_NE(testing::schema_error(R"({"type":"number","minimum":0.5,"maximum":300000000})")
                .find("/ 10^1"),
            std::string::npos);
}

TEST(JsonMatcher, RecursiveReferences) {
  const JsonMatcher tree(grammar_of(R"({"$defs":{"node":{"type":"object","properties":{
      "v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},
      "required":["v","kids"]}},
      "$ref":"#/$defs/node"})"));
  EXPECT_TRUE(matches(
      tree, R"({"v":1,"kids":[{"v":2,"kids":[]},{"v":3,"kids":[{"v":4,"kids":[]}]}]})", true));
  EXPECT_FALSE(matches(tree, R"({"v":1,"kids":[{"v":2}]})", true));
  // A schema that reaches itself through alternatives only would expand forever: refused.
  EXPECT_EQ(testing::schema_error(R"({"$ref": "#"})"),
            "the schema's root: the schema refers to itself with no object or array in between "
            "(an endless expansion)");
  EXPECT_EQ(testing::schema_error(R"({"$defs": {"a": {"anyOf": [{"type": "null"}, {"$ref":
      "#/$defs/b"}]}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})"),
            "'/$defs/a': the schema refers to itself with no object or array in between (an "
            "endless expansion)");
}

TEST(JsonMatcher, WhitespaceRunsNumbersAndNestingAreBounded) {
  const JsonMatcher m = any_value_matcher();
  EXPECT_TRUE(matches(m, "[\n" + std::string(kMaxJsonIndent, ' ') + "1,\n\t2 ]", true));
  EXPECT_FALSE(matches(m, "[\n" + std::string(kMaxJsonIndent + 1, ' '), false));
  EXPECT_FALSE(matches(m, "[  1]", false));   // one space at most
  EXPECT_FALSE(matches(m, "[ \n1]", false));  // a newline starts a run or nothing
  EXPECT_FALSE(matches(m, "[\n\n1]", false));
  EXPECT_TRUE(matches(m, std::string(kMaxJsonNumberBytes, '1'), true));
  EXPECT_FALSE(matches(m, std::string(kMaxJsonNumberBytes + 1, '1'), false));
  EXPECT_TRUE(matches(m, std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']'), true));
  EXPECT_FALSE(matches(m, std::string(kMaxJsonDepth + 1, '['), false));
}

}  // namespace
}  // namespace beam
