// parse_ebnf: a recursive-descent reader of GBNF. A rule runs until the next `name ::=` or the
// end of the text, so rules may span lines; `#` starts a comment outside strings and classes.
#include "runtime/structured/ebnf_syntax.h"

#include <algorithm>
#include <optional>
#include <string>

#include "core/check.h"
#include "runtime/structured/grammar_literal.h"

namespace beam {
namespace {

bool word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

int64_t tree_depth(const EbnfExpr& e) {
  int64_t deepest = 0;
  for (const EbnfExpr& c : e.children) deepest = std::max(deepest, tree_depth(c));
  return deepest + 1;
}

EbnfExpr code_point(char32_t c) {
  return EbnfExpr{.kind = EbnfExpr::Kind::kSet, .set = {{c, c}}};
}

class Parser {
 public:
  Parser(std::string_view text, int32_t max_repeat) : t_(text), max_repeat_(max_repeat) {}

  Expected<std::vector<EbnfRule>> rules() {
    std::vector<EbnfRule> out;
    skip_space();
    while (!error_ && i_ < t_.size()) {
      if (!at_rule_start()) {
        fail(looks_like_lark() ? "expected a rule `name ::= ...`; this looks like a Lark grammar "
                                 "(`name: ...`), and beamserve reads GBNF"
                               : "expected a rule `name ::= ...`");
        break;
      }
      EbnfRule rule;
      rule.offset = i_;
      rule.name = read_name();
      skip_space();
      i_ += 3;  // "::="
      rule.body = alternates();
      if (error_) break;
      if (i_ < t_.size() && !at_rule_start()) {
        fail(t_[i_] == ')' ? "unbalanced ')'" : "unexpected '" + std::string(1, t_[i_]) + "'");
        break;
      }
      out.push_back(std::move(rule));
    }
    if (error_) return *error_;
    if (out.empty()) return make_error("the grammar defines no rule (expected `root ::= ...`)");
    if (out.size() > static_cast<size_t>(kMaxGrammarRules))
      return make_error("the grammar has " + std::to_string(out.size()) + " rules (at most " +
                        std::to_string(kMaxGrammarRules) + ")");
    int64_t depth_sum = 0;
    for (const EbnfRule& rule : out) depth_sum += tree_depth(rule.body);
    if (depth_sum > kMaxGrammarDepthSum)
      return make_error(
          "the grammar nests too deeply overall: its rules' expression depths add "
          "up to " +
          std::to_string(depth_sum) + " (at most " + std::to_string(kMaxGrammarDepthSum) + ")");
    return out;
  }

 private:
  void fail(const std::string& message) {
    if (error_) return;
    const TextPosition p = text_position(t_, i_);
    error_ = make_error("grammar line " + std::to_string(p.line) + ":" + std::to_string(p.column) +
                        ": " + message);
  }

  bool looks_like_lark() const {
    if (t_.find("::=") != std::string_view::npos) return false;
    size_t k = i_;
    while (k < t_.size() && (word_char(t_[k]) || t_[k] == '?')) ++k;
    while (k < t_.size() && (t_[k] == ' ' || t_[k] == '\t')) ++k;
    return k > i_ && k < t_.size() && t_[k] == ':';
  }

  void skip_space() {
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++i_;
      } else if (c == '#') {
        while (i_ < t_.size() && t_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  // Whether the text at i_ is `name ::=` (the next rule starts).
  bool at_rule_start() const {
    size_t k = i_;
    while (k < t_.size() && word_char(t_[k])) ++k;
    if (k == i_) return false;
    while (k < t_.size() && (t_[k] == ' ' || t_[k] == '\t')) ++k;
    return t_.substr(k, 3) == "::=";
  }

  std::string read_name() {
    const size_t start = i_;
    while (i_ < t_.size() && word_char(t_[i_])) ++i_;
    return std::string(t_.substr(start, i_ - start));
  }

  EbnfExpr alternates() {
    EbnfExpr alt{.kind = EbnfExpr::Kind::kAlternate};
    alt.children.push_back(sequence());
    while (!error_ && i_ < t_.size() && t_[i_] == '|' && count_node()) {
      ++i_;
      alt.children.push_back(sequence());
    }
    if (alt.children.size() == 1) return std::move(alt.children[0]);
    return alt;
  }

  EbnfExpr sequence() {
    EbnfExpr seq{.kind = EbnfExpr::Kind::kSequence};
    skip_space();
    while (!error_ && i_ < t_.size() && t_[i_] != '|' && t_[i_] != ')' && !at_rule_start()) {
      EbnfExpr item = postfix(primary());
      if (error_) break;
      if (item.kind != EbnfExpr::Kind::kEmpty && count_node())
        seq.children.push_back(std::move(item));
      skip_space();
    }
    if (seq.children.empty()) return EbnfExpr{};
    if (seq.children.size() == 1) return std::move(seq.children[0]);
    return seq;
  }

  EbnfExpr primary() {
    const char c = t_[i_];
    if (c == '"' || c == '\'') return literal(c);
    if (c == '[') return char_class();
    if (c == '.') {
      ++i_;
      return EbnfExpr{.kind = EbnfExpr::Kind::kSet, .set = normalized_ranges({{0, kMaxCodePoint}})};
    }
    if (c == '(') {
      ++i_;
      if (t_.substr(i_, 1) == "=" || t_.substr(i_, 1) == "!") {
        fail("lookahead assertions `(= ...)` are not supported");
        return {};
      }
      if (++depth_ > kMaxGrammarNesting) {
        fail("groups nested more than " + std::to_string(kMaxGrammarNesting) + " deep");
        return {};
      }
      EbnfExpr inner = alternates();
      --depth_;
      if (error_) return {};
      if (i_ >= t_.size() || t_[i_] != ')') {
        fail("expected ')'");
        return {};
      }
      ++i_;
      return inner;
    }
    if (word_char(c)) {
      EbnfExpr ref{.kind = EbnfExpr::Kind::kRef, .offset = i_};
      ref.name = read_name();
      return ref;
    }
    fail("unexpected '" + std::string(1, c) + "'");
    return {};
  }

  EbnfExpr postfix(EbnfExpr item) {
    while (!error_ && i_ < t_.size()) {
      const char c = t_[i_];
      int32_t min = 0, max = -1;
      if (c == '*') {
        ++i_;
      } else if (c == '+') {
        ++i_;
        min = 1;
      } else if (c == '?') {
        ++i_;
        max = 1;
      } else if (c == '{') {
        if (!repeat_bounds(min, max)) return {};
      } else {
        break;
      }
      item = EbnfExpr{
          .kind = EbnfExpr::Kind::kRepeat, .children = {std::move(item)}, .min = min, .max = max};
    }
    return item;
  }

  // `{m}`, `{m,}`, `{m,n}` or `{,n}` at i_.
  bool repeat_bounds(int32_t& min, int32_t& max) {
    ++i_;
    auto number = [&]() -> std::optional<int64_t> {
      skip_space();
      if (i_ >= t_.size() || t_[i_] < '0' || t_[i_] > '9') return std::nullopt;
      int64_t v = 0;
      while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') {
        v = std::min<int64_t>(v * 10 + (t_[i_] - '0'), int64_t{1} << 40);
        ++i_;
      }
      skip_space();
      return v;
    };
    const std::optional<int64_t> lo = number();
    std::optional<int64_t> hi = lo;
    if (i_ < t_.size() && t_[i_] == ',') {
      ++i_;
      hi = number();
      if (!hi) hi = -1;
    }
    if (i_ >= t_.size() || t_[i_] != '}' || (!lo && *hi < 0)) {
      fail("expected a repetition `{m}`, `{m,}`, `{m,n}` or `{,n}`");
      return false;
    }
    ++i_;
    min = static_cast<int32_t>(std::min<int64_t>(lo.value_or(0), max_repeat_ + 1));
    const int64_t top = *hi < 0 ? min : *hi;
    if (std::max<int64_t>(min, top) > max_repeat_) {
      fail("a repetition of more than " + std::to_string(max_repeat_) + " times");
      return false;
    }
    if (*hi >= 0 && *hi < min) {
      fail("a repetition `{m,n}` with m > n");
      return false;
    }
    max = *hi < 0 ? -1 : static_cast<int32_t>(*hi);
    return true;
  }

  EbnfExpr literal(char quote) {
    ++i_;
    EbnfExpr seq{.kind = EbnfExpr::Kind::kSequence};
    while (!error_) {
      if (i_ >= t_.size() || t_[i_] == '\n') {
        fail("unterminated string");
        return {};
      }
      if (t_[i_] == quote) {
        ++i_;
        break;
      }
      if (const std::optional<char32_t> c = character(); c && count_node())
        seq.children.push_back(code_point(*c));
    }
    if (error_ || seq.children.empty()) return {};
    if (seq.children.size() == 1) return std::move(seq.children[0]);
    return seq;
  }

  EbnfExpr char_class() {
    const size_t start = i_;
    ++i_;
    const bool negated = i_ < t_.size() && t_[i_] == '^';
    if (negated) ++i_;
    std::vector<CodePointRange> ranges;
    while (!error_) {
      if (i_ >= t_.size() || t_[i_] == '\n') {
        fail("unterminated character class");
        return {};
      }
      if (t_[i_] == ']') {
        ++i_;
        break;
      }
      const std::optional<char32_t> lo = character();
      if (!lo) return {};
      char32_t hi = *lo;
      if (i_ + 1 < t_.size() && t_[i_] == '-' && t_[i_ + 1] != ']') {
        ++i_;
        const std::optional<char32_t> end = character();
        if (!end) return {};
        if (*end < *lo) {
          fail("a character range whose end comes before its start");
          return {};
        }
        hi = *end;
      }
      ranges.push_back({*lo, hi});
    }
    if (error_) return {};
    std::vector<CodePointRange> set = normalized_ranges(std::move(ranges));
    if (negated) set = complement_ranges(set);
    if (set.empty()) {
      i_ = start;
      fail("the character class matches no character");
      return {};
    }
    return EbnfExpr{.kind = EbnfExpr::Kind::kSet, .set = std::move(set)};
  }

  // One character of a string or class at i_ (grammar_literal.h); nullopt after fail().
  std::optional<char32_t> character() {
    Expected<char32_t> c = read_literal_char(t_, i_);
    if (c.ok()) return *c;
    fail(c.error().message);
    return std::nullopt;
  }

  // One more expression; false (and the parse failed) past kMaxGrammarExpressions.
  bool count_node() {
    if (++nodes_ <= kMaxGrammarExpressions) return true;
    fail("the grammar is too large (more than " + std::to_string(kMaxGrammarExpressions) +
         " expressions)");
    return false;
  }

  std::string_view t_;
  size_t i_ = 0;
  int32_t max_repeat_;
  int32_t depth_ = 0;  // groups open at i_
  int64_t nodes_ = 0;  // expressions parsed so far (kMaxGrammarExpressions)
  std::optional<Error> error_;
};

}  // namespace

EbnfExpr ebnf_seq(std::vector<EbnfExpr> items) {
  return EbnfExpr{.kind = EbnfExpr::Kind::kSequence, .children = std::move(items)};
}

EbnfExpr ebnf_alt(std::vector<EbnfExpr> alts) {
  if (alts.size() == 1) return std::move(alts[0]);
  return EbnfExpr{.kind = EbnfExpr::Kind::kAlternate, .children = std::move(alts)};
}

EbnfExpr ebnf_repeat(EbnfExpr x, int32_t min, int32_t max) {
  return EbnfExpr{
      .kind = EbnfExpr::Kind::kRepeat, .children = {std::move(x)}, .min = min, .max = max};
}

EbnfExpr ebnf_ref(std::string name) {
  return EbnfExpr{.kind = EbnfExpr::Kind::kRef, .name = std::move(name)};
}

EbnfExpr ebnf_text(std::string_view text) {
  EbnfExpr seq{.kind = EbnfExpr::Kind::kSequence};
  for (size_t at = 0; at < text.size();) {
    if (text[at] == '\\') {  // read_literal_char would read an escape
      seq.children.push_back(code_point('\\'));
      ++at;
      continue;
    }
    const Expected<char32_t> c = read_literal_char(text, at);
    BEAM_CHECK(c.ok()) << "literal text is not valid UTF-8: " << c.error().message;
    seq.children.push_back(code_point(*c));
  }
  return seq;
}

Expected<std::vector<EbnfRule>> parse_ebnf(std::string_view text, int32_t max_repeat) {
  return Parser(text, max_repeat).rules();
}

}  // namespace beam
