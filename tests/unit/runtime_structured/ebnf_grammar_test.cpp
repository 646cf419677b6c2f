// GBNF grammars (EbnfGrammar, EbnfMatcher): the syntax, errors that name their cause and place,
// and the matcher against independent answers — the regex engine for regular grammars, hand
// checkers for recursive ones (every string up to a length), nlohmann for JSON.
#include <gtest/gtest.h>

#include <cctype>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/structured/ebnf_matcher.h"
#include "runtime/structured/ebnf_syntax.h"
#include "runtime/structured/vocab_index.h"
#include "structured_test_util.h"

namespace beam {
namespace {

using testing::verdict;

std::shared_ptr<const EbnfGrammar> compile_ok(std::string_view text) {
  auto g = EbnfGrammar::compile(text);
  EXPECT_TRUE(g.ok()) << text << ": " << (g.ok() ? "" : g.error().message);
  return g.ok() ? *g : nullptr;
}

std::string compile_error(std::string_view text) {
  auto g = EbnfGrammar::compile(text);
  EXPECT_FALSE(g.ok()) << text;
  return g.ok() ? "" : g.error().message;
}

// Every string over `alphabet` of up to `max_len` bytes.
void for_each_string(std::string_view alphabet, size_t max_len,
                     const std::function<void(const std::string&)>& f) {
  std::string s;
  std::function<void()> rec = [&] {
    f(s);
    if (s.size() == max_len) return;
    for (char c : alphabet) {
      s.push_back(c);
      rec();
      s.pop_back();
    }
  };
  rec();
}

TEST(EbnfGrammar, LiteralsClassesEscapesAndRepetitions) {
  struct Case {
    const char* grammar;
    std::vector<std::string> yes, no;
  };
  const std::vector<Case> cases = {
      {R"g(root ::= "yes" | "no")g", {"yes", "no"}, {"", "ye", "yess", "No"}},
      {R"g(root ::= [a-c]+ "-" [^a-z\n]?)g", {"a-", "cab-7", "b-Z", "a-é"}, {"-", "a-b", "a-\n"}},
      {"root ::= 'it''s' \"\\\"\\t\\x41\\u00e9\\U0001F600\"",
       {"its\"\tAé\xF0\x9F\x98\x80"},
       {"its"}},
      {R"g(root ::= "a"{2} "b"{1,3} "c"{2,} "d"{,1})g",
       {"aabcc", "aabbbccccd"},
       {"abcc", "aabbbbcc", "aabc", "aabccdd"}},
      {"# a comment\nroot ::= x y # trailing\nx ::= \"x\"\n  | \"X\"\ny ::=\n  \"y\"*\n",
       {"x", "Xyy"},
       {"xX", "y"}},
      {R"g(root ::= ( "a" | ) "b")g", {"b", "ab"}, {"a", "aab"}},
      {R"g(root ::= . "!")g", {"a!", "é!", "\n!"}, {"!", "ab!"}},
      {R"g(root ::= [\]\-\\] [-a] [a-])g", {"]-a", "\\a-", "-aa"}, {"a-a"}},
      {R"g(root ::= "")g", {""}, {"a"}},
      // docs/structured_output.md's example
      {R"g(root   ::= call (";" " "? call)*        # the rule named root is where the output starts
call   ::= name "(" (arg ("," arg)*)? ")"
arg    ::= call | [0-9]+ | "\"" [^"\n]* "\""
name   ::= [a-z] [a-z_]*)g",
       {"f()", "add(1,mul(2,3)); log(\"x y\");g()"},
       {"f(", "F()", "f(\"\n\")", "f();"}},
  };
  for (const Case& c : cases) {
    auto g = compile_ok(c.grammar);
    ASSERT_NE(g, nullptr);
    const EbnfMatcher m(g);
    for (const std::string& s : c.yes) EXPECT_EQ(verdict(m, s), 2) << c.grammar << " on " << s;
    for (const std::string& s : c.no) EXPECT_NE(verdict(m, s), 2) << c.grammar << " on " << s;
  }
}

// Regular grammars become one terminal; the language and every prefix's liveness equal the
// regex engine's on every string of up to 6 bytes.
TEST(EbnfGrammar, RegularGrammarsAgreeWithTheRegexEngine) {
  const std::vector<std::pair<const char*, const char*>> pairs = {
      {R"g(root ::= ("ab" | "a")* "c"?)g", "(ab|a)*c?"},
      {R"g(root ::= num ("-" num)*  num ::= "1"+ | "0")g", "(1+|0)(-(1+|0))*"},
      {R"g(root ::= [a-b]{2,3} | "c"{1,2} "a")g", "[a-b]{2,3}|c{1,2}a"},
      {R"g(root ::= x x  x ::= "a"? "b")g", "a?ba?b"},
  };
  for (const auto& [gbnf, regex] : pairs) {
    auto g = compile_ok(gbnf);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->rules().size(), 1u) << gbnf;  // the whole root is one terminal
    auto dfa = ByteDfa::from_full_match(regex);
    ASSERT_TRUE(dfa.ok()) << dfa.error().message;
    const EbnfMatcher m(g);
    for_each_string("abc01-", 6, [&](const std::string& s) {
      const int32_t d = (*dfa)->walk(0, s);
      const int expected = d == ByteDfa::kDead ? 0 : (*dfa)->accepting(d) ? 2 : 1;
      ASSERT_EQ(verdict(m, s), expected) << gbnf << " on '" << s << "'";
    });
  }
}

// Nested parentheses around x's: whole matches are the balanced strings, and a prefix is alive
// exactly when it never closes more than it opened.
TEST(EbnfGrammar, RecursiveRulesMatchBalancedText) {
  for (const char* gbnf :
       {R"g(root ::= item*  item ::= "(" root ")" | "x")g",
        "root ::= (\"(\" root \")\" | \"x\") root | \"\"",
        R"g(root ::= seq?  seq ::= item seq?  item ::= "(" (seq | "") ")" | [x])g"}) {
    auto g = compile_ok(gbnf);
    ASSERT_NE(g, nullptr);
    const EbnfMatcher m(g);
    for_each_string("()x", 10, [&](const std::string& s) {
      int depth = 0;
      bool alive = true;
      for (char c : s) {
        depth += c == '(' ? 1 : c == ')' ? -1 : 0;
        alive = alive && depth >= 0;
      }
      const int expected = !alive ? 0 : depth == 0 ? 2 : 1;
      ASSERT_EQ(verdict(m, s), expected) << gbnf << " on '" << s << "'";
    });
  }
}

// Arithmetic with precedence (recursion through three rules) against a recursive-descent check.
TEST(EbnfGrammar, ArithmeticExpressionsMatchARecursiveDescentCheck) {
  auto g = compile_ok(R"g(
    root   ::= expr
    expr   ::= term (("+" | "-") term)*
    term   ::= factor ("*" factor)*
    factor ::= [0-9]+ | "(" expr ")"
  )g");
  ASSERT_NE(g, nullptr);
  const EbnfMatcher m(g);
  auto parses = [](const std::string& s) {
    size_t i = 0;
    std::function<bool()> expr, term, factor;
    factor = [&]() -> bool {
      if (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
        return true;
      }
      if (i < s.size() && s[i] == '(') {
        ++i;
        if (!expr() || i >= s.size() || s[i] != ')') return false;
        ++i;
        return true;
      }
      return false;
    };
    term = [&]() -> bool {
      if (!factor()) return false;
      while (i < s.size() && s[i] == '*') {
        ++i;
        if (!factor()) return false;
      }
      return true;
    };
    expr = [&]() -> bool {
      if (!term()) return false;
      while (i < s.size() && (s[i] == '+' || s[i] == '-')) {
        ++i;
        if (!term()) return false;
      }
      return true;
    };
    return expr() && i == s.size();
  };
  // The same language with direct left recursion (rewritten as repetition when compiled).
  auto left = compile_ok(R"g(
    root   ::= expr
    expr   ::= expr "+" term | expr "-" term | term
    term   ::= term "*" factor | factor
    factor ::= [0-9]+ | "(" expr ")"
  )g");
  ASSERT_NE(left, nullptr);
  const EbnfMatcher ml(left);
  int matched = 0;
  for_each_string("1+*()", 7, [&](const std::string& s) {
    const bool whole = verdict(m, s) == 2;
    matched += whole;
    ASSERT_EQ(whole, parses(s)) << "'" << s << "'";
    ASSERT_EQ(verdict(ml, s), verdict(m, s)) << "'" << s << "'";
  });
  EXPECT_GT(matched, 100);
}

// A context-free grammar for the tests' own recognizer: rules named by one upper-case letter,
// each alternative a string of symbols (upper case: a rule, anything else: that byte; "" is
// the empty text). rules[0] is the start.
struct TinyCfg {
  std::vector<std::pair<char, std::vector<std::string>>> rules;

  // The grammar in GBNF: rule X as `r-X`, bytes as one-byte strings.
  std::string gbnf() const {
    std::string out = std::string("root ::= r-") + rules[0].first + "\n";
    for (const auto& [name, alts] : rules) {
      out += std::string("r-") + name + " ::=";
      for (size_t a = 0; a < alts.size(); ++a) {
        out += a == 0 ? " " : " | ";
        if (alts[a].empty()) out += "\"\"";
        for (char c : alts[a])
          out += std::isupper(static_cast<unsigned char>(c)) ? std::string(" r-") + c + " "
                                                             : std::string(" \"") + c + "\" ";
      }
      out += "\n";
    }
    return out;
  }

  // Whether the start rule derives s: the least fixpoint of "rule X derives s[i, j)" over all
  // (X, i, j), which left recursion cannot send into a loop.
  bool derives(const std::string& s) const {
    const size_t n = s.size();
    std::map<char, std::vector<std::vector<uint8_t>>> d;
    for (const auto& [name, alts] : rules) d[name].assign(n + 1, std::vector<uint8_t>(n + 1, 0));
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& [name, alts] : rules)
        for (const std::string& alt : alts)
          for (size_t i = 0; i <= n; ++i) {
            std::vector<uint8_t> at(n + 1, 0);  // positions the symbols so far can end at
            at[i] = 1;
            for (char c : alt) {
              std::vector<uint8_t> next(n + 1, 0);
              for (size_t p = 0; p <= n; ++p) {
                if (!at[p]) continue;
                if (!std::isupper(static_cast<unsigned char>(c))) {
                  if (p < n && s[p] == c) next[p + 1] = 1;
                  continue;
                }
                for (size_t q = p; q <= n; ++q)
                  if (d[c][p][q]) next[q] = 1;
              }
              at = std::move(next);
            }
            for (size_t j = i; j <= n; ++j)
              if (at[j] && !d[name][i][j]) d[name][i][j] = changed = true;
          }
    }
    return d[rules[0].first][0][n] != 0;
  }
};

// Left recursion through other rules (two- and three-rule cycles, with direct recursion, through
// a leading group or `+`) is rewritten as repetition: the grammar compiles and accepts exactly the
// recognizer's strings, and a text the matcher rejects starts no accepted string.
TEST(EbnfGrammar, IndirectLeftRecursionKeepsTheLanguage) {
  struct Case {
    TinyCfg cfg;
    std::string gbnf;  // "" = cfg.gbnf(); else the same language written with groups
    std::string alphabet;
    size_t max_len;
  };
  const std::vector<Case> cases = {
      {{{{'S', {"Aa", "b"}}, {'A', {"Sc", "d"}}}}, "", "abcd", 7},
      {{{{'S', {"Ax", "1"}}, {'A', {"By", "2"}}, {'B', {"Sz", "Aw", "3"}}}}, "", "xyzw123", 5},
      {{{{'E', {"T", "E+T"}}, {'T', {"F", "T*F"}}, {'F', {"(E)", "n", "E!"}}}}, "", "n+*()!", 6},
      {{{{'S', {"Ax", "qx", "y"}}, {'A', {"Sz"}}}},
       "root ::= s\ns ::= (a | \"q\") \"x\" | \"y\"\na ::= s \"z\"",
       "xyzq",
       7},
      {{{{'S', {"Aa", "b"}}, {'A', {"SC"}}, {'C', {"c", "cC"}}}},
       "root ::= s\ns ::= a \"a\" | \"b\"\na ::= s \"c\"+",
       "abc",
       8},
      {{{{'S', {"Aa", "", "b"}}, {'A', {"Sc"}}}}, "", "abc", 7},
  };
  for (const Case& c : cases) {
    const std::string text = c.gbnf.empty() ? c.cfg.gbnf() : c.gbnf;
    auto g = compile_ok(text);
    ASSERT_NE(g, nullptr) << text;
    const EbnfMatcher m(g);
    std::set<std::string> live;  // prefixes of accepted strings
    std::vector<std::string> dead;
    int accepted = 0;
    for_each_string(c.alphabet, c.max_len, [&](const std::string& s) {
      const int v = verdict(m, s);
      const bool want = c.cfg.derives(s);
      ASSERT_EQ(v == 2, want) << text << " on '" << s << "'";
      if (want) {
        ++accepted;
        for (size_t k = 0; k <= s.size(); ++k) live.insert(s.substr(0, k));
      }
      if (v == 0) dead.push_back(s);
    });
    EXPECT_GT(accepted, 3) << text;
    for (const std::string& s : dead) EXPECT_FALSE(live.contains(s)) << text << " on '" << s << "'";
  }
}

// Random small grammars over {a, b} (left recursion direct and indirect, empty alternatives,
// unproductive rules): each compiles to exactly the recognizer's language on every string up to 6
// bytes, or is refused for one of the documented reasons. Where a state reaches the matcher's
// kMaxGrammarStacks the later parses are dropped (documented: that only narrows), so there only
// "accepted ⇒ derived" is checked.
TEST(EbnfGrammar, RandomGrammarsKeepTheirLanguageOrAreRefusedByName) {
  std::mt19937 gen(20261205);
  int compiled = 0, capped_strings = 0;
  for (int g = 0; g < 400; ++g) {
    TinyCfg cfg;
    const int rules = 2 + static_cast<int>(gen() % 3);
    for (int r = 0; r < rules; ++r) {
      std::vector<std::string> alts;
      const int count = 1 + static_cast<int>(gen() % 3);
      for (int a = 0; a < count; ++a) {
        std::string alt;
        const int len = static_cast<int>(gen() % 4);
        for (int k = 0; k < len; ++k) {
          const uint32_t pick = gen() % (2 + static_cast<uint32_t>(rules));
          alt += pick < 2 ? static_cast<char>('a' + pick) : static_cast<char>('A' + (pick - 2));
        }
        alts.push_back(alt);
      }
      cfg.rules.push_back({static_cast<char>('A' + r), alts});
    }
    const std::string text = cfg.gbnf();
    auto compiled_grammar = EbnfGrammar::compile(text);
    if (!compiled_grammar.ok()) {
      const std::string& e = compiled_grammar.error().message;
      EXPECT_TRUE(e.find("is left-recursive") != std::string::npos ||
                  e.find("can never finish") != std::string::npos ||
                  e.find("too ambiguous") != std::string::npos)
          << text << " -> " << e;
      continue;
    }
    ++compiled;
    const EbnfMatcher m(*compiled_grammar);
    for_each_string("ab", 6, [&](const std::string& s) {
      GrammarState state = m.initial(), scratch;
      bool alive = true, capped = state.ends.size() >= kMaxGrammarStacks;
      for (size_t k = 0; k < s.size() && alive; ++k) {
        alive = m.advance_bytes(state, std::string_view(s).substr(k, 1), scratch);
        capped = capped || state.ends.size() >= kMaxGrammarStacks;
      }
      const bool accepted = alive && m.can_end(state);
      if (capped) {
        if (accepted) {
          ASSERT_TRUE(cfg.derives(s)) << text << " on '" << s << "'";
        }
        ++capped_strings;
        return;
      }
      ASSERT_EQ(accepted, cfg.derives(s)) << text << " on '" << s << "'";
    });
  }
  EXPECT_GT(compiled, 100);
  EXPECT_LT(capped_strings, 2000);  // the exact comparison covers nearly every string
}

// Substituting rules into one another multiplies their alternatives: a cycle of ten rules of ten
// alternatives each would need 10^10; it is refused by name, promptly.
TEST(EbnfGrammar, LeftRecursionRewritesAreBounded) {
  std::string text = "root ::= r0\n";
  for (int r = 0; r < 10; ++r) {
    text += "r" + std::to_string(r) + " ::=";
    for (int a = 0; a < 10; ++a)
      text += std::string(a == 0 ? " " : " | ") + "r" + std::to_string((r + 1) % 10) + " \"" +
              std::to_string(a) + "\"";
    text += " | \"x\"\n";
  }
  const std::string e = compile_error(text);
  EXPECT_NE(e.find("removing its left recursion would take more than 1000000 expressions"),
            std::string::npos)
      << e;
}

// llama.cpp's json.gbnf: compact dumps of random documents match whole; any text it accepts
// whole is JSON.
TEST(EbnfGrammar, LlamaCppJsonGrammarAcceptsJson) {
  auto g = compile_ok(R"g(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)g");
  ASSERT_NE(g, nullptr);
  const EbnfMatcher m(g);
  std::mt19937 rng(11);
  std::function<nlohmann::json(int)> random_value = [&](int depth) -> nlohmann::json {
    switch (rng() % (depth > 3 ? 4 : 6)) {
      case 0:
        return static_cast<int>(rng() % 2000) - 1000;
      case 1:
        return std::string("s\"\\é\n") + std::to_string(rng() % 10);
      case 2:
        return rng() % 2 == 0;
      case 3:
        return nullptr;
      case 4: {
        nlohmann::json a = nlohmann::json::array();
        for (uint32_t k = rng() % 4; k > 0; --k) a.push_back(random_value(depth + 1));
        return a;
      }
      default: {
        nlohmann::json o = nlohmann::json::object();
        for (uint32_t k = rng() % 4; k > 0; --k)
          o["k" + std::to_string(rng() % 5)] = random_value(depth + 1);
        return o;
      }
    }
  };
  for (int doc = 0; doc < 200; ++doc) {
    nlohmann::json o = nlohmann::json::object();
    o["v"] = random_value(0);
    const std::string text = o.dump();
    ASSERT_EQ(verdict(m, text), 2) << text;
    for (int edit = 0; edit < 5; ++edit) {
      std::string broken = text;
      broken[rng() % broken.size()] = "{}[],:\"\\ 1ax"[rng() % 13];
      if (verdict(m, broken) == 2) {
        EXPECT_FALSE(nlohmann::json::parse(broken, nullptr, false).is_discarded()) << broken;
      }
    }
  }
}

// Repetition by tail calls does not grow a stack; nesting grows it up to kMaxGrammarDepth;
// ambiguous grammars keep a few deduplicated stacks.
TEST(EbnfGrammar, StacksStayBoundedUnderRepetitionAndAmbiguity) {
  const EbnfMatcher m(compile_ok(R"g(root ::= item*  item ::= "(" root ")" | "x")g"));
  GrammarState state = m.initial(), scratch;
  ASSERT_TRUE(m.advance_bytes(state, std::string(5000, 'x'), scratch));
  EXPECT_TRUE(m.can_end(state));
  EXPECT_LE(state.frames.size(), 8u);
  ASSERT_TRUE(m.advance_bytes(state, std::string(300, '(') + std::string(300, ')'), scratch));
  EXPECT_TRUE(m.can_end(state));
  EXPECT_FALSE(m.advance_bytes(state, std::string(kMaxGrammarDepth + 8, '('), scratch));

  const EbnfMatcher ambiguous(compile_ok(R"g(root ::= s s  s ::= "a" s | "")g"));
  state = ambiguous.initial();
  ASSERT_TRUE(ambiguous.advance_bytes(state, std::string(1000, 'a'), scratch));
  EXPECT_TRUE(ambiguous.can_end(state));
  EXPECT_LE(state.ends.size(), 4u);
}

// Nullable rules reach one configuration along exponentially many paths (16 d's, each with four
// empty alternatives: 4^16 per level): the expansion expands each configuration once, so the
// matcher answers at once and exactly. The language: z's and !'s where every proper prefix holds
// at least as many z's as !'s, whole when the !'s outnumber the z's by one (checked up to two
// nested calls: deeper ones hold more than kMaxGrammarStacks stacks, 16 per level).
TEST(EbnfGrammar, NullableNestingExpandsEachConfigurationOnce) {
  const EbnfMatcher m(compile_ok(R"g(root ::= a "!"
      a ::= b b b b
      b ::= d d d d
      d ::= "" | "" | "" | "" | "z" root)g"));
  for_each_string("z!", 6, [&](const std::string& s) {
    int64_t open = 1, depth = 1, verdict_want = 1;
    for (char c : s) {
      if (open == 0) {
        verdict_want = 0;
        break;
      }
      open += c == 'z' ? 1 : -1;
      depth = std::max(depth, open);
    }
    if (verdict_want != 0 && open == 0) verdict_want = 2;
    if (depth > 3) return;
    EXPECT_EQ(verdict(m, s), verdict_want) << s;
  });
}

// A parse budget stops an expansion once spent: the state holds only what was reached.
TEST(EbnfGrammar, ParseBudgetsBoundTheExpansion) {
  const EbnfMatcher m(compile_ok(R"g(root ::= x
      x ::= y y y y
      y ::= "a" x? | [a-z] x? | "")g"));
  GrammarState state = m.initial(), next;
  for (int i = 0; i < 6; ++i) {
    ParseBudget unlimited;
    ASSERT_TRUE(m.advance(state, 'a', next, &unlimited));
    std::swap(state, next);
  }
  EXPECT_EQ(state.ends.size(), static_cast<size_t>(kMaxGrammarStacks));  // 4^6 stacks, capped
  ParseBudget small{100};
  m.advance(state, 'a', next, &small);
  EXPECT_TRUE(small.spent());
  EXPECT_LT(next.ends.size(), state.ends.size());
}

TEST(EbnfGrammar, ErrorsNameTheProblemAndWhere) {
  struct Case {
    const char* grammar;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {"root ::= \"a\" b", "line 1:14: rule 'root' refers to undefined rule 'b'"},
           {"root ::= \"a\"\nroot ::= \"b\"", "line 2: rule 'root' is defined twice"},
           {"start ::= \"a\"", "no rule 'root'"},
           {"root ::= \"abc", "line 1:14: unterminated string"},
           {"root ::= [a-", "unterminated character class"},
           {"root ::= [^\\x00-\\U0010FFFF]", "line 1:10: the character class matches no"},
           {"root ::= [z-a]", "end comes before its start"},
           {"root ::= \"\\q\"", "unknown escape '\\q'"},
           {"root ::= \"\\uD800\"", "surrogate"},
           {"root ::= \"a\"{3,2}", "m > n"},
           {"root ::= \"a\"{20000}", "more than 10000 times"},
           {"root ::= (\"a\"", "expected ')'"},
           {"root ::= \"a\" )", "unbalanced ')'"},
           {"root ::= x\nx ::= y \"a\" | \"b\"\ny ::= \"c\"? x", "is left-recursive"},
           {"root ::= x\nx ::= x \"a\" | \"b\" x", "rule 'x' can never finish"},
           {"root ::= x\nx ::= x \"a\" | x", "rule 'x' can never finish"},
           {"root ::= (e \"a\")*  e ::= e? \"b\"", "rule 'e' is left-recursive"},
           {"root ::= \"a\" root", "rule 'root' can never finish"},
           {"root ::= (= \"a\")", "lookahead"},
           {"start: \"a\" | rule\nrule: /b+/", "looks like a Lark grammar"},
           {"", "defines no rule"},
           {"root ::= \"a\" @", "unexpected '@'"},
       }) {
    const std::string e = compile_error(c.grammar);
    EXPECT_NE(e.find(c.message), std::string::npos) << c.grammar << " -> " << e;
  }
  EXPECT_TRUE(EbnfGrammar::compile("main ::= \"a\"", "main").ok());
}

// Compiling recurses along rule references and groups: chains up to the limits compile (on the
// large stack), past them they are refused by name, never a crashed thread.
TEST(EbnfGrammar, DeepGrammarsCompileOrAreRefused) {
  auto chain = [](int rules) {
    std::string text = "root ::= r0";
    for (int i = 0; i + 1 < rules; ++i)
      text += "\nr" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " \"a\"";
    return text + "\nr" + std::to_string(rules - 1) + " ::= \"b\"";  // root + `rules` rules
  };
  auto grammar = EbnfGrammar::compile(chain(kMaxGrammarRules - 1));
  EXPECT_TRUE(grammar.ok()) << grammar.error().message;
  EXPECT_NE(compile_error(chain(kMaxGrammarRules)).find("rules (at most 2000)"), std::string::npos);
  const std::string nested = "root ::= " + std::string(kMaxGrammarNesting + 1, '(') + "\"a\"" +
                             std::string(kMaxGrammarNesting + 1, ')');
  EXPECT_NE(compile_error(nested).find("groups nested more than 100 deep"), std::string::npos);
  std::string deep_item;
  for (int k = 0; k < 90; ++k) deep_item += "(\"x\" ";
  std::string text = "root ::= r0";
  for (int i = 0; i < 600; ++i)
    text += "\nr" + std::to_string(i) + " ::= " + deep_item + "r" + std::to_string(i + 1) +
            std::string(90, ')');
  text += "\nr600 ::= \"b\"";
  EXPECT_NE(compile_error(text).find("nests too deeply overall"), std::string::npos);
}

// Eight lines of nested nullable rules, each item of one able to be empty: before any text the
// parse can skip 4^levels leaves in one chain of expansion steps. Twelve levels need more steps
// than a start may take and are refused at compile; at eight the start fits (its stacks capped),
// and a mask runs out of its parse budget as a named error. Expanding recursively, such a chain
// overflowed the engine thread's stack (the server died on the request).
std::string nested_nullable_rules(int levels) {
  std::string text = "root ::= r0";
  for (int k = 0; k < levels; ++k) {
    const std::string next = k + 1 < levels ? "r" + std::to_string(k + 1) : "leaf";
    text += "\nr" + std::to_string(k) + " ::= " + next + " " + next + " " + next + " " + next +
            " | \"x\" r" + std::to_string(k);
  }
  return text + "\nleaf ::= \"a\" | \"\" | \"(\" root \")\"";
}

TEST(EbnfGrammar, StartStatesAreBoundedAndExpansionsNeedNoStack) {
  EXPECT_EQ(compile_error(nested_nullable_rules(12)),
            "the grammar is too ambiguous to enforce: its start needs more than " +
                std::to_string(kMaxStartParseSteps) + " parse steps");

  const auto g = compile_ok(nested_nullable_rules(8));
  ASSERT_NE(g, nullptr);
  const EbnfMatcher m(g);
  const GrammarState start = m.initial();
  EXPECT_EQ(start.ends.size(), static_cast<size_t>(kMaxGrammarStacks));
  EXPECT_TRUE(m.can_end(start));
  std::vector<VocabToken> tokens;
  for (const char* t : {"a", "x", "(", ")", "aa", "xa", "()"})
    tokens.push_back({static_cast<int32_t>(tokens.size()), t});
  const VocabIndex vocab(static_cast<int64_t>(tokens.size()), tokens);
  std::vector<uint32_t> bits(allowed_mask_words(vocab.vocab_size()));
  MaskScratch scratch;
  EXPECT_FALSE(vocab.add_allowed(m, start, bits, scratch));  // the mask's budget ran out

  // A small nest still expands whole: up to 4^2 leaves of "a" in a row, each prefix complete.
  const auto small = compile_ok(nested_nullable_rules(2));
  ASSERT_NE(small, nullptr);
  const EbnfMatcher ms(small);
  GrammarState s = ms.initial(), tmp;
  for (int i = 0; i < 16; ++i) {
    EXPECT_TRUE(ms.can_end(s)) << i;
    EXPECT_TRUE(ms.advance_bytes(s, "a", tmp)) << i;
  }
  EXPECT_TRUE(ms.can_end(s));
  EXPECT_FALSE(ms.advance_bytes(s, "a", tmp));
  EXPECT_FALSE(ms.advance_bytes(s, "x", tmp));
}

// Stacks whose terminals each walk the vocabulary (free text up to a terminator of their own)
// spend the mask's budget by the trie nodes they visit: 300 of them over 20,000 tokens are a
// named error, not seconds of walks every mask (1,000 took 1.2 s a mask over Qwen3's vocabulary);
// ten of them fit.
TEST(EbnfGrammar, MaskWalksSpendTheParseBudget) {
  std::mt19937 rng(3);
  std::vector<VocabToken> tokens;
  for (int32_t id = 0; id < 20000; ++id) {
    std::string t(1 + rng() % 6, 'a');
    for (char& c : t) c = static_cast<char>('a' + rng() % 26);
    tokens.push_back({id, t});
  }
  tokens.push_back({20000, "\x01"});
  const VocabIndex vocab(20001, tokens);
  auto mask_of = [&](int alternatives) {
    std::string text = "root ::= \"\"";  // recursive, so each alternative keeps its terminal
    for (int i = 0; i < alternatives; ++i) text += " | t" + std::to_string(i) + " root";
    for (int i = 0; i < alternatives; ++i)
      text += "\nt" + std::to_string(i) + " ::= [^\\x01]* \"\\x01" + std::to_string(i) + "\"";
    const auto g = compile_ok(text);
    const EbnfMatcher m(g);
    std::vector<uint32_t> bits(allowed_mask_words(vocab.vocab_size()));
    MaskScratch scratch;
    return std::make_pair(vocab.add_allowed(m, m.initial(), bits, scratch), bits);
  };
  const auto [ten_ok, ten_bits] = mask_of(10);
  ASSERT_TRUE(ten_ok);
  EXPECT_TRUE(mask_bit(ten_bits, 0));
  EXPECT_TRUE(mask_bit(ten_bits, 20000));
  EXPECT_FALSE(mask_of(300).first);
}

// Literal alternatives: each is a terminal of its own once the rule is too big to inline, and
// each terminal's fixed cost counts against the automata budget (200,000 of them held 463 MB);
// the parse itself stops at kMaxGrammarExpressions (a string's characters are expressions).
TEST(EbnfGrammar, ManyLiteralsAreBounded) {
  auto literals = [](int n) {
    std::string text = "root ::= \"l0\"";
    for (int i = 1; i < n; ++i) text += " | \"l" + std::to_string(100000 + i) + "\"";
    return text;
  };
  ASSERT_NE(compile_ok(literals(5000)), nullptr);
  EXPECT_EQ(compile_error(literals(40000)),
            "the grammar is too complex: its terminals' automata pass 64 MiB");
  const std::string e = compile_error(literals(130000));
  EXPECT_NE(e.find("the grammar is too large (more than 1000000 expressions)"), std::string::npos)
      << e;
}

// A grammar whose terminals would need ever more automata is refused instead of compiling for
// minutes: each rule here needs 2^(n+1) DFA states (past ByteDfa's limit, so it falls back to
// smaller terminals), and the attempts pass kMaxGrammarTerminalBytes.
TEST(EbnfGrammar, CompileWorkIsBounded) {
  std::string text = "root ::= r12";
  for (int n = 13; n < 12 + 80; ++n) text += " | r" + std::to_string(n);
  for (int n = 12; n < 12 + 80; ++n)
    text += "\nr" + std::to_string(n) + " ::= [ab]* \"a\" [ab]{" + std::to_string(n) + "}";
  const std::string e = compile_error(text);
  EXPECT_NE(e.find("the grammar is too complex"), std::string::npos) << e;

  // Terminals whose determinizing runs out of steps (ByteDfa::kMaxPatternBuildSteps) spend the
  // grammar's shared build budget (64 of them took 2.9 s to refuse before it).
  std::string nested = "root ::= n0";
  for (int n = 1; n < 64; ++n) nested += " | n" + std::to_string(n);
  for (int n = 0; n < 64; ++n)
    nested +=
        "\nn" + std::to_string(n) + " ::= ((\"a\"? ){100}){100} \"k" + std::to_string(n) + "\"";
  const std::string spent = "the grammar is too complex: its terminals take more than " +
                            std::to_string(kMaxSharedBuildSteps) + " steps to build";
  EXPECT_EQ(compile_error(nested), spent);

  // Once the budget is spent the grammar is refused rather than its terminals lowered as rules:
  // 1,000 rules of 20,000 nested optional letters so lowered recursed past a 256 MiB stack.
  std::string slow = "root ::= s0 root";
  for (int n = 1; n < 1000; ++n) slow += " | s" + std::to_string(n) + " root";
  slow += " | \"\"";
  for (int n = 0; n < 1000; ++n)
    slow +=
        "\ns" + std::to_string(n) + " ::= ((([a-z]?){200}){100})* \"t" + std::to_string(n) + "\"";
  EXPECT_EQ(compile_error(slow), spent);
}

}  // namespace
}  // namespace beam
