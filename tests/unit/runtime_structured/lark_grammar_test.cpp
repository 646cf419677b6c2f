// Lark grammars (lark_grammar.h) through EbnfGrammar::compile_gbnf_or_lark: the Lark constructs,
// %import common / %ignore, Lark's JSON example on random documents, and errors that name the
// construct and its line.
#include "runtime/structured/lark_grammar.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "runtime/structured/ebnf_matcher.h"

namespace beam {
namespace {

bool whole_match(const EbnfMatcher& m, std::string_view text) {
  GrammarState state = m.initial(), scratch;
  return m.advance_bytes(state, text, scratch) && m.can_end(state);
}

std::shared_ptr<const EbnfGrammar> lark_ok(std::string_view text) {
  EXPECT_TRUE(looks_like_lark(text));
  auto g = EbnfGrammar::compile_gbnf_or_lark(text);
  EXPECT_TRUE(g.ok()) << text << "\n" << (g.ok() ? "" : g.error().message);
  return g.ok() ? *g : nullptr;
}

TEST(LarkGrammar, ConstructsMatchTheirText) {
  struct Case {
    const char* grammar;
    std::vector<std::string> yes, no;
  };
  const std::vector<Case> cases = {
      {"start: \"a\" b? c+\nb: \"b\"\nc: \"c\"  // a comment", {"ac", "abccc"}, {"a", "abbc"}},
      {"start: greeting \" \" NAME\n?greeting: \"hi\" | \"hello\" -> hello\nNAME: /[A-Z][a-z]*/",
       {"hi Ann", "hello B"},
       {"hi ann", "hey Ann"}},
      {"start: \"select\"i \" \" /[a-z_]+/i", {"SELECT a_B", "Select x"}, {"selec x"}},
      {"start: \"a\"..\"c\" [\"!\"] (\"x\" | \"y\")~2..3", {"axy", "b!yyx"}, {"dxy", "axyxy"}},
      {"start: item\n     | item \",\" start\n!item.2: DIGIT\n%import common.DIGIT",
       {"1", "1,2,3"},
       {"1,", ",1"}},
      {"start: list\nlist: list \",\" NUMBER | NUMBER\n%import common (NUMBER, WS)\n%ignore WS",
       {"1,2.5,3", " 1 , 2e5 ,3 ", "7"},
       {"1,,2", "1 2"}},
      {"start: \"\\\"\" /[^\"]*/ \"\\\"\" \"\\n\"", {"\"x y\"\n"}, {"\"x\"y\"\n"}},
      {"start: A B\nA: \"a\"\nB: \"\\u00e9\" | \"\\x41\"", {"a\xc3\xa9", "aA"}, {"ab"}},
      // indirect left recursion (an operator grammar split over rules) is rewritten too
      {"start: sum\nsum: product | addition\naddition: sum \"+\" product\n"
       "product: atom | product \"*\" atom\natom: DIGIT | \"(\" sum \")\"\n"
       "%import common.DIGIT",
       {"1", "1+2*3", "(1+2)*3+4", "1+2+3"},
       {"1+", "+1", "1**2", "(1+2"}},
      {"start: a\na: b \"x\" | \"y\"\nb: a \"z\"", {"y", "yzx", "yzxzx"}, {"yz", "x", "yzxz"}},
      // docs/structured_output.md's example
      {R"l(start: list
list: list "," item | item           // direct left recursion: fine
?item: NUMBER | "true"i | /[a-z_]+/ -> word
%import common.NUMBER
%import common.WS
%ignore WS)l",
       {"1, TRUE,x_y", " 2.5 "},
       {"1,", "1 2", "A"}},
  };
  for (const Case& c : cases) {
    auto g = lark_ok(c.grammar);
    ASSERT_NE(g, nullptr);
    const EbnfMatcher m(g);
    for (const std::string& s : c.yes) EXPECT_TRUE(whole_match(m, s)) << c.grammar << " on " << s;
    for (const std::string& s : c.no) EXPECT_FALSE(whole_match(m, s)) << c.grammar << " on " << s;
  }
}

// Lark's own JSON example: compact and indented dumps of random documents match (WS is
// ignored between tokens); text with a broken token does not.
TEST(LarkGrammar, LarksJsonExampleMatchesJson) {
  auto g = lark_ok(R"l(
?start: value
?value: object
      | array
      | string
      | SIGNED_NUMBER      -> number
      | "true"             -> true
      | "false"            -> false
      | "null"             -> null

array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : string ":" value

string : ESCAPED_STRING

%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
)l");
  ASSERT_NE(g, nullptr);
  const EbnfMatcher m(g);
  std::mt19937 rng(5);
  std::function<nlohmann::json(int)> value = [&](int depth) -> nlohmann::json {
    switch (rng() % (depth > 2 ? 4 : 6)) {
      case 0:
        return static_cast<int>(rng() % 200) - 100;
      case 1:
        return "s\"\\" + std::to_string(rng() % 10);
      case 2:
        return rng() % 3 == 0 ? nlohmann::json(nullptr) : nlohmann::json(rng() % 2 == 0);
      case 3:
        return 0.25 * static_cast<double>(rng() % 9);
      case 4: {
        nlohmann::json a = nlohmann::json::array();
        for (uint32_t k = rng() % 3; k > 0; --k) a.push_back(value(depth + 1));
        return a;
      }
      default: {
        nlohmann::json o = nlohmann::json::object();
        for (uint32_t k = rng() % 3; k > 0; --k) o["k" + std::to_string(k)] = value(depth + 1);
        return o;
      }
    }
  };
  for (int doc = 0; doc < 100; ++doc) {
    const nlohmann::json v = value(0);
    EXPECT_TRUE(whole_match(m, v.dump())) << v.dump();
    EXPECT_TRUE(whole_match(m, v.dump(2) + "\n")) << v.dump(2);
  }
  for (const char* bad : {"[1,]", "{\"a\" 1}", "tru", "[1 2]", "\"a"})
    EXPECT_FALSE(whole_match(m, bad)) << bad;
}

TEST(LarkGrammar, ErrorsNameTheConstructAndItsLine) {
  struct Case {
    std::string grammar;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {"start: x\n_sep{x, s}: x (s x)*", "line 2:5: templates"},
           {"start: \"a\"\n%declare X", "line 2:1: `%declare` is not supported"},
           {"start: A\n%import foo.A", "only `%import common...`"},
           {"start: A\n%import common.NOPE", "common has no terminal 'NOPE'"},
           {"start: item", "'item' is used but not defined"},
           {"item: \"a\"", "no `start` rule"},
           {"start: /a+/x", "flag 'x' is not supported"},
           {"start: /a(?=b)/", "line 1:8: /a(?=b)/: "},
           {"start: \"abc", "line 1:12: unterminated string"},
           {"start: \"a\"\nstart: \"b\"", "line 2:7: 'start' is defined twice"},
           {"start:\n", "'start' has no body"},
           {"start: a\na: b \"x\" | \"y\"\nb: \"w\"? a \"z\"", "left-recursive"},
           {"start: " + std::string(101, '(') + "\"a\"" + std::string(101, ')'),
            "groups nested more than 100 deep"},
       }) {
    auto g = EbnfGrammar::compile_gbnf_or_lark(c.grammar);
    ASSERT_FALSE(g.ok()) << c.grammar;
    EXPECT_NE(g.error().message.find(c.message), std::string::npos)
        << c.grammar << " -> " << g.error().message;
  }
  // GBNF text (it has `::=`) is read as GBNF.
  EXPECT_FALSE(looks_like_lark("root ::= \"a\""));
  EXPECT_TRUE(EbnfGrammar::compile_gbnf_or_lark("root ::= \"a\"").ok());
}

}  // namespace
}  // namespace beam
