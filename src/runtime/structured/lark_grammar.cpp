// lark_to_gbnf: a recursive-descent reader of Lark definitions that writes each as one GBNF rule
// on the line it starts on. A definition runs until the next line that starts another one (or a
// directive); its alternatives may continue on lines that start with `|`.
#include "runtime/structured/lark_grammar.h"

#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/structured/ebnf_syntax.h"
#include "runtime/structured/grammar_literal.h"
#include "runtime/structured/regex_syntax.h"

namespace beam {
namespace {

// Lark's common.lark terminals in GBNF, under a prefix no Lark name can have.
constexpr std::string_view kCommonPrefix = "common-";
constexpr std::string_view kCommon = R"g(
common-DIGIT ::= [0-9]
common-HEXDIGIT ::= [a-fA-F0-9]
common-INT ::= [0-9]+
common-SIGNED_INT ::= [+-]? common-INT
common-DECIMAL ::= common-INT "." common-INT? | "." common-INT
common-_EXP ::= [eE] common-SIGNED_INT
common-FLOAT ::= common-INT common-_EXP | common-DECIMAL common-_EXP?
common-SIGNED_FLOAT ::= [+-]? common-FLOAT
common-NUMBER ::= common-FLOAT | common-INT
common-SIGNED_NUMBER ::= [+-]? common-NUMBER
common-ESCAPED_STRING ::= "\"" ([^"\\\n] | "\\" [^\n])* "\""
common-LCASE_LETTER ::= [a-z]
common-UCASE_LETTER ::= [A-Z]
common-LETTER ::= [a-zA-Z]
common-WORD ::= [a-zA-Z]+
common-CNAME ::= [_a-zA-Z] [_a-zA-Z0-9]*
common-WS_INLINE ::= [ \t]+
common-WS ::= [ \t\x0C\r\n]+
common-CR ::= "\r"
common-LF ::= "\n"
common-NEWLINE ::= ("\r"? "\n")+
common-SH_COMMENT ::= "#" [^\n]*
common-CPP_COMMENT ::= "//" [^\n]*
common-C_COMMENT ::= "/*" ([^*] | "*"+ [^*/])* "*"+ "/"
common-SQL_COMMENT ::= "--" [^\n]*
)g";

bool name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool name_char(char c) {
  return name_start(c) || (c >= '0' && c <= '9');
}
// Lark: a terminal's name is upper case (after leading underscores), a rule's lower case.
bool is_terminal_name(std::string_view name) {
  const size_t k = name.find_first_not_of('_');
  return k != std::string_view::npos && name[k] >= 'A' && name[k] <= 'Z';
}

std::string hex_code_point(char32_t c) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\U%08X", static_cast<unsigned>(c));
  return buf;
}

// A GBNF string of the code points (non-alphanumerics escaped).
std::string gbnf_string(const std::u32string& text) {
  if (text.empty()) return "\"\"";
  std::string out = "\"";
  for (char32_t c : text) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out += plain ? std::string(1, static_cast<char>(c)) : hex_code_point(c);
  }
  return out + "\"";
}

std::string gbnf_class(const std::vector<CodePointRange>& set) {
  std::string out = "[";
  for (const CodePointRange& r : set) {
    out += hex_code_point(r.lo);
    if (r.hi != r.lo) out += "-" + hex_code_point(r.hi);
  }
  return out + "]";
}

// A regex tree as a GBNF expression.
std::string gbnf_of(const RegexNode& n) {
  switch (n.kind) {
    case RegexNode::Kind::kSet:
      return gbnf_class(n.set);
    case RegexNode::Kind::kConcat:
    case RegexNode::Kind::kAlternate: {
      if (n.children.empty()) return "\"\"";
      std::string out = "(";
      for (size_t i = 0; i < n.children.size(); ++i) {
        if (i > 0) out += n.kind == RegexNode::Kind::kConcat ? " " : " | ";
        out += gbnf_of(n.children[i]);
      }
      return out + ")";
    }
    case RegexNode::Kind::kRepeat:
      return "(" + gbnf_of(n.children[0]) + "){" + std::to_string(n.min) + "," +
             (n.max < 0 ? "" : std::to_string(n.max)) + "}";
    case RegexNode::Kind::kEmpty:
    case RegexNode::Kind::kStart:
    case RegexNode::Kind::kEnd:
      break;
  }
  return "\"\"";
}

// Adds the other case of every ASCII letter in the tree's sets (the `i` flag).
void fold_case(RegexNode& n) {
  if (n.kind == RegexNode::Kind::kSet) {
    std::vector<CodePointRange> extra = n.set;
    for (const CodePointRange& r : n.set) {
      for (char32_t c = std::max<char32_t>(r.lo, 'A'); c <= std::min<char32_t>(r.hi, 'z'); ++c) {
        if (c >= 'a' && c <= 'z') extra.push_back({c - 32, c - 32});
        if (c >= 'A' && c <= 'Z') extra.push_back({c + 32, c + 32});
      }
    }
    n.set = normalized_ranges(std::move(extra));
  }
  for (RegexNode& c : n.children) fold_case(c);
}

class Translator {
 public:
  explicit Translator(std::string_view text) : t_(text) {}

  Expected<std::string> run() {
    skip_blank();
    while (!error_ && i_ < t_.size()) {
      if (t_[i_] == '%')
        directive();
      else
        definition();
      skip_blank();
    }
    if (error_) return *error_;
    if (defined_.count("start") == 0)
      return make_error("Lark grammar: no `start` rule (the grammar's start)");
    for (const std::string& name : used_)
      if (defined_.count(name) == 0)
        return make_error("Lark grammar: '" + name +
                          "' is used but not defined (import common "
                          "terminals with `%import common." +
                          name + "`)");
    std::string ignore = "\"\"";
    if (!ignored_.empty()) {
      ignore = "(";
      for (size_t k = 0; k < ignored_.size(); ++k) ignore += (k ? " | " : "") + ignored_[k];
      ignore += ")*";
    }
    out_ +=
        "\nlark-ignore ::= " + ignore + "\n" + std::string(kLarkRoot) + " ::= start lark-ignore\n";
    if (uses_common_) out_ += kCommon;
    return out_;
  }

 private:
  void fail(const std::string& message) {
    if (error_) return;
    const TextPosition p = text_position(t_, i_);
    error_ = make_error("Lark grammar line " + std::to_string(p.line) + ":" +
                        std::to_string(p.column) + ": " + message);
  }

  // Starts a GBNF line for the definition at i_ on its own line number.
  void start_output_line() {
    for (; counted_ < i_; ++counted_) line_ += t_[counted_] == '\n';  // i_ only moves on
    while (out_line_ < line_) {
      out_ += '\n';
      ++out_line_;
    }
  }

  void skip_comment() {
    while (i_ < t_.size() && t_[i_] != '\n') ++i_;
  }
  bool at_comment() const { return t_.substr(i_, 2) == "//"; }

  // Spaces, comments and newlines between definitions.
  void skip_blank() {
    while (i_ < t_.size()) {
      if (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\r' || t_[i_] == '\n')
        ++i_;
      else if (at_comment())
        skip_comment();
      else
        break;
    }
  }

  // Spaces and comments inside a definition: inside brackets newlines too; at depth 0 a newline
  // ends the definition unless the next line continues it with `|` (then true: keep going).
  void skip_inline(int depth) {
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == ' ' || c == '\t' || c == '\r') {
        ++i_;
      } else if (at_comment()) {
        skip_comment();
      } else if (c == '\n') {
        if (depth > 0) {
          ++i_;
          continue;
        }
        size_t k = i_;
        while (k < t_.size() && (t_[k] == ' ' || t_[k] == '\t' || t_[k] == '\r' || t_[k] == '\n'))
          ++k;
        if (k < t_.size() && t_[k] == '|') {
          i_ = k;
          return;
        }
        return;
      } else {
        break;
      }
    }
  }
  bool at_end_of_definition() const { return i_ >= t_.size() || t_[i_] == '\n'; }

  std::string read_name() {
    const size_t start = i_;
    while (i_ < t_.size() && name_char(t_[i_])) ++i_;
    return std::string(t_.substr(start, i_ - start));
  }

  void directive() {
    start_output_line();
    const size_t start = i_;
    ++i_;
    const std::string word = read_name();
    skip_inline(0);
    if (word == "import") {
      import();
    } else if (word == "ignore") {
      if (at_end_of_definition()) {
        fail("`%ignore` needs a terminal or a literal");
        return;
      }
      ignored_.push_back(alternatives(0, /*in_rule=*/false));
    } else {
      i_ = start;
      fail("`%" + word + "` is not supported (only %import common... and %ignore)");
      return;
    }
    skip_inline(0);
    if (!error_ && !at_end_of_definition()) fail("unexpected text after the directive");
  }

  // %import common.NAME [-> ALIAS] | %import common (A, B, ...)
  void import() {
    const std::string module = read_name();
    if (module != "common") {
      fail("only `%import common...` is supported (Lark's common terminals)");
      return;
    }
    std::vector<std::pair<std::string, std::string>> names;  // (common name, local name)
    if (i_ < t_.size() && t_[i_] == '.') {
      ++i_;
      const std::string name = read_name();
      skip_inline(0);
      std::string local = name;
      if (t_.substr(i_, 2) == "->") {
        i_ += 2;
        skip_inline(0);
        local = read_name();
      }
      names.emplace_back(name, local);
    } else {
      skip_inline(0);
      if (i_ >= t_.size() || t_[i_] != '(') {
        fail("expected `.NAME` or `(NAME, ...)` after `%import common`");
        return;
      }
      ++i_;
      while (!error_) {
        skip_inline(1);
        const std::string name = read_name();
        if (name.empty()) {
          fail("expected a name in the import list");
          return;
        }
        names.emplace_back(name, name);
        skip_inline(1);
        if (i_ < t_.size() && t_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < t_.size() && t_[i_] == ')') {
          ++i_;
          break;
        }
        fail("expected ',' or ')' in the import list");
        return;
      }
    }
    for (const auto& [name, local] : names) {
      if (kCommon.find("\n" + std::string(kCommonPrefix) + name + " ::=") ==
          std::string_view::npos) {
        fail("common has no terminal '" + name + "'");
        return;
      }
      define(local);
      uses_common_ = true;
      out_ += " " + local + " ::= " + std::string(kCommonPrefix) + name;
    }
  }

  void define(const std::string& name) {
    if (!defined_.insert(name).second) fail("'" + name + "' is defined twice");
  }

  // [?!]name[.priority]: alternatives
  void definition() {
    start_output_line();
    if (t_[i_] == '?' || t_[i_] == '!') ++i_;
    if (i_ >= t_.size() || !name_start(t_[i_])) {
      fail("expected a definition `name: ...`");
      return;
    }
    const std::string name = read_name();
    if (i_ < t_.size() && t_[i_] == '.') {  // a priority: no effect on what matches
      ++i_;
      if (i_ < t_.size() && t_[i_] == '-') ++i_;
      while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') ++i_;
    }
    if (i_ < t_.size() && t_[i_] == '{') {
      fail("templates (`name{...}`) are not supported");
      return;
    }
    skip_inline(0);
    if (i_ >= t_.size() || t_[i_] != ':') {
      fail("expected ':' after '" + name + "'");
      return;
    }
    ++i_;
    define(name);
    skip_inline(0);
    if (at_end_of_definition()) {
      fail("'" + name + "' has no body");
      return;
    }
    const std::string body = alternatives(0, !is_terminal_name(name));
    if (error_) return;
    if (!at_end_of_definition()) {
      fail("unexpected '" + std::string(1, t_[i_]) + "'");
      return;
    }
    out_ += name + " ::= " + body;
  }

  std::string alternatives(int depth, bool in_rule) {
    std::string out = sequence(depth, in_rule);
    while (!error_ && i_ < t_.size() && t_[i_] == '|') {
      ++i_;
      skip_inline(depth);
      out += " | " + sequence(depth, in_rule);
    }
    return out;
  }

  std::string sequence(int depth, bool in_rule) {
    std::string out;
    while (!error_ && i_ < t_.size() && !at_end_of_definition()) {
      const char c = t_[i_];
      if (c == '|' || c == ')' || c == ']') break;
      if (t_.substr(i_, 2) == "->") {  // an alias names the tree node: no effect on the text
        i_ += 2;
        skip_inline(depth);
        read_name();
        skip_inline(depth);
        continue;
      }
      std::string item = postfix(primary(depth, in_rule), depth);
      if (error_) break;
      out += (out.empty() ? "" : " ") + item;
      skip_inline(depth);
    }
    return out.empty() ? "\"\"" : out;
  }

  std::string postfix(std::string item, int depth) {
    while (!error_ && i_ < t_.size()) {
      const char c = t_[i_];
      if (c == '*' || c == '+' || c == '?') {
        ++i_;
        item = "(" + item + ")" + c;
      } else if (c == '~') {
        ++i_;
        skip_inline(depth);
        const std::string lo = read_number();
        std::string hi = lo;
        if (t_.substr(i_, 2) == "..") {
          i_ += 2;
          hi = read_number();
        }
        if (lo.empty() || hi.empty()) {
          fail("expected `~ n` or `~ n..m`");
          return {};
        }
        item = "(" + item + "){" + lo + "," + hi + "}";
      } else {
        break;
      }
    }
    return item;
  }

  std::string read_number() {
    const size_t start = i_;
    while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') ++i_;
    return std::string(t_.substr(start, i_ - start));
  }

  // A terminal inside a rule may be preceded by ignored text (%ignore).
  static std::string token(const std::string& text, bool in_rule) {
    return in_rule ? "(lark-ignore " + text + ")" : text;
  }

  std::string primary(int depth, bool in_rule) {
    const char c = t_[i_];
    if (c == '(' || c == '[') {
      if (depth + 1 > kMaxGrammarNesting) {
        fail("groups nested more than " + std::to_string(kMaxGrammarNesting) + " deep");
        return {};
      }
      ++i_;
      skip_inline(depth + 1);
      std::string inner = alternatives(depth + 1, in_rule);
      if (error_) return {};
      const char close = c == '(' ? ')' : ']';
      if (i_ >= t_.size() || t_[i_] != close) {
        fail(std::string("expected '") + close + "'");
        return {};
      }
      ++i_;
      return "(" + inner + ")" + (c == '[' ? "?" : "");
    }
    if (c == '"') {
      std::optional<std::u32string> text = string_literal();
      if (!text) return {};
      const bool insensitive =
          i_ < t_.size() && t_[i_] == 'i' && (i_ + 1 >= t_.size() || !name_char(t_[i_ + 1]));
      if (insensitive) ++i_;
      if (t_.substr(i_, 2) == "..") {  // "a".."z": a character range
        i_ += 2;
        std::optional<std::u32string> hi = string_literal();
        if (!hi) return {};
        if (text->size() != 1 || hi->size() != 1 || (*hi)[0] < (*text)[0]) {
          fail("a range `\"a\"..\"z\"` needs two single characters in order");
          return {};
        }
        return token(gbnf_class({{(*text)[0], (*hi)[0]}}), in_rule);
      }
      if (!insensitive) return token(gbnf_string(*text), in_rule);
      std::string out = "(";
      for (char32_t ch : *text) {
        RegexNode set{.kind = RegexNode::Kind::kSet, .set = {{ch, ch}}};
        fold_case(set);
        out += (out.size() > 1 ? " " : "") + gbnf_class(set.set);
      }
      return token(out + ")", in_rule);
    }
    if (c == '/') return regex_literal(in_rule);
    if (name_start(c)) {
      const std::string name = read_name();
      if (i_ < t_.size() && t_[i_] == '{') {
        fail("templates (`name{...}`) are not supported");
        return {};
      }
      used_.insert(name);
      return is_terminal_name(name) ? token(name, in_rule) : name;
    }
    fail("unexpected '" + std::string(1, c) + "'");
    return {};
  }

  // "..." with Python's escapes, as code points.
  std::optional<std::u32string> string_literal() {
    if (i_ >= t_.size() || t_[i_] != '"') {
      fail("expected a string");
      return std::nullopt;
    }
    ++i_;
    std::u32string out;
    while (true) {
      if (i_ >= t_.size() || t_[i_] == '\n') {
        fail("unterminated string");
        return std::nullopt;
      }
      const char c = t_[i_];
      if (c == '"') {
        ++i_;
        return out;
      }
      std::optional<char32_t> cp = character();
      if (!cp) return std::nullopt;
      out += *cp;
    }
  }

  // One character of a string at i_ (grammar_literal.h); nullopt after fail().
  std::optional<char32_t> character() {
    Expected<char32_t> c = read_literal_char(t_, i_);
    if (c.ok()) return *c;
    fail(c.error().message);
    return std::nullopt;
  }

  // /pattern/flags: the pattern syntax of JSON Schema's `pattern` (Python's `(?P<name>` read as
  // `(?<name>`), matched whole; the flag `i` folds ASCII case.
  std::string regex_literal(bool in_rule) {
    const size_t start = i_;
    ++i_;
    std::string pattern;
    bool in_class = false;
    while (true) {
      if (i_ >= t_.size() || t_[i_] == '\n') {
        i_ = start;
        fail("unterminated regular expression");
        return {};
      }
      const char c = t_[i_];
      if (c == '\\' && i_ + 1 < t_.size()) {
        pattern += t_.substr(i_, 2);
        i_ += 2;
        continue;
      }
      if (c == '/' && !in_class) break;
      if (c == '[') in_class = true;
      if (c == ']') in_class = false;
      pattern += c;
      ++i_;
    }
    ++i_;
    bool insensitive = false;
    while (i_ < t_.size() && name_char(t_[i_])) {
      if (t_[i_] != 'i') {
        fail("regular expression flag '" + std::string(1, t_[i_]) + "' is not supported (only i)");
        return {};
      }
      insensitive = true;
      ++i_;
    }
    for (size_t k = pattern.find("(?P<"); k != std::string::npos; k = pattern.find("(?P<", k))
      pattern.erase(k + 2, 1);
    Expected<RegexNode> tree = parse_regex(pattern);
    if (!tree.ok()) {
      i_ = start;
      fail("/" + pattern + "/: " + tree.error().message);
      return {};
    }
    if (insensitive) fold_case(*tree);
    return token(gbnf_of(*tree), in_rule);
  }

  std::string_view t_;
  size_t i_ = 0;
  std::string out_;
  int32_t out_line_ = 1;  // the line out_ is on
  size_t counted_ = 0;    // t_'s newlines are counted up to here
  int32_t line_ = 1;      // the line of t_[counted_]
  std::set<std::string> defined_, used_;
  std::vector<std::string> ignored_;
  bool uses_common_ = false;
  std::optional<Error> error_;
};

}  // namespace

bool looks_like_lark(std::string_view text) {
  return text.find("::=") == std::string_view::npos;
}

Expected<std::string> lark_to_gbnf(std::string_view lark) {
  return Translator(lark).run();
}

}  // namespace beam
