// parse_regex: a recursive-descent parser of the ECMA-262 pattern subset in regex_syntax.h.
#include "runtime/structured/regex_syntax.h"

#include <algorithm>
#include <optional>
#include <string>

#include "core/utf8_decode.h"

namespace beam {
namespace {

using Ranges = std::vector<CodePointRange>;

constexpr char32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;
constexpr int kMaxGroupDepth = 64;

Ranges digits() {
  return {{'0', '9'}};
}
Ranges word() {
  return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
}
// ECMA-262 WhiteSpace and LineTerminator.
Ranges space() {
  return normalized_ranges({{'\t', '\r'},
                            {' ', ' '},
                            {0xA0, 0xA0},
                            {0x1680, 0x1680},
                            {0x2000, 0x200A},
                            {0x2028, 0x2029},
                            {0x202F, 0x202F},
                            {0x205F, 0x205F},
                            {0x3000, 0x3000},
                            {0xFEFF, 0xFEFF}});
}
// '.': anything but a line terminator.
Ranges dot() {
  return complement_ranges({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}});
}

RegexNode set_node(Ranges r) {
  return RegexNode{.kind = RegexNode::Kind::kSet, .set = normalized_ranges(std::move(r))};
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  explicit Parser(std::string_view p) : p_(p) {}

  Expected<RegexNode> parse() {
    BEAM_ASSIGN_OR_RETURN(RegexNode root, alternation(0, true));
    if (pos_ < p_.size()) return fail("unmatched ')'");
    return root;
  }

 private:
  // An escape or code point in a class or atom: a single code point, or a class escape's set.
  struct Piece {
    std::optional<char32_t> cp;
    Ranges set;
  };

  bool at_end() const { return pos_ >= p_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : '\0'; }

  Error fail(const std::string& what) const {
    return make_error(what + " (at byte " + std::to_string(pos_) + " of the regular expression)");
  }

  Expected<char32_t> code_point() {
    if (const std::optional<char32_t> cp = decode_utf8(p_, pos_)) return *cp;
    return fail("invalid UTF-8");
  }

  // 'count' hex digits (0: a braced \u{...}) as one code point.
  Expected<char32_t> hex(int count) {
    char32_t v = 0;
    int read = 0;
    const bool braced = count == 0;
    if (braced) ++pos_;  // '{'
    while (braced ? peek() != '}' : read < count) {
      const int d = hex_value(peek());
      if (d < 0) return fail("bad hexadecimal escape");
      v = v * 16 + static_cast<char32_t>(d);
      if (v > kMaxCodePoint) return fail("code point beyond U+10FFFF");
      ++pos_;
      ++read;
    }
    if (braced) {
      if (read == 0) return fail("empty \\u{}");
      ++pos_;  // '}'
    }
    return v;
  }

  // After a backslash. `in_class`: \b is a backspace there, a word boundary outside.
  Expected<Piece> escape(bool in_class) {
    if (at_end()) return fail("pattern ends in a backslash");
    const char c = p_[pos_++];
    switch (c) {
      case 'd':
        return Piece{std::nullopt, digits()};
      case 'D':
        return Piece{std::nullopt, complement_ranges(digits())};
      case 'w':
        return Piece{std::nullopt, word()};
      case 'W':
        return Piece{std::nullopt, complement_ranges(word())};
      case 's':
        return Piece{std::nullopt, space()};
      case 'S':
        return Piece{std::nullopt, complement_ranges(space())};
      case 't':
        return Piece{U'\t', {}};
      case 'n':
        return Piece{U'\n', {}};
      case 'r':
        return Piece{U'\r', {}};
      case 'f':
        return Piece{U'\f', {}};
      case 'v':
        return Piece{U'\v', {}};
      case '0':
        if (peek() >= '0' && peek() <= '9') return fail("octal escapes are not supported");
        return Piece{U'\0', {}};
      case 'c': {
        const char l = peek();
        if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z'))) return fail("bad \\c escape");
        ++pos_;
        return Piece{static_cast<char32_t>(l % 32), {}};
      }
      case 'x': {
        BEAM_ASSIGN_OR_RETURN(char32_t v, hex(2));
        return Piece{v, {}};
      }
      case 'u': {
        BEAM_ASSIGN_OR_RETURN(char32_t v, hex(peek() == '{' ? 0 : 4));
        if (v >= 0xD800 && v <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {  // a pair
          pos_ += 2;
          BEAM_ASSIGN_OR_RETURN(char32_t low, hex(4));
          if (low < 0xDC00 || low > 0xDFFF) return fail("unpaired surrogate escape");
          v = 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00);
        }
        if (v >= kSurrogateLo && v <= kSurrogateHi) return fail("unpaired surrogate escape");
        return Piece{v, {}};
      }
      case 'b':
        if (in_class) return Piece{U'\b', {}};
        return fail("word boundaries (\\b) are not supported");
      case 'B':
        return fail("word boundaries (\\B) are not supported");
      case 'k':
        return fail("backreferences are not supported");
      case 'p':
      case 'P':
        return fail("Unicode property escapes are not supported");
      default:
        break;
    }
    if (c >= '1' && c <= '9') return fail("backreferences are not supported");
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
      return fail(std::string("unknown escape \\") + c);
    --pos_;  // an escaped punctuation or other character stands for itself
    BEAM_ASSIGN_OR_RETURN(char32_t cp, code_point());
    return Piece{cp, {}};
  }

  // After '['.
  Expected<RegexNode> char_class() {
    const bool negate = peek() == '^';
    if (negate) ++pos_;
    Ranges set;
    while (true) {
      if (at_end()) return fail("unterminated character class");
      if (peek() == ']') {
        ++pos_;
        break;
      }
      BEAM_ASSIGN_OR_RETURN(Piece lo, class_atom());
      const bool range = peek() == '-' && peek(1) != ']' && pos_ + 1 < p_.size();
      if (range && lo.cp) {
        ++pos_;  // '-'
        BEAM_ASSIGN_OR_RETURN(Piece hi, class_atom());
        if (!hi.cp) return fail("a class escape cannot end a range");
        if (*hi.cp < *lo.cp) return fail("range out of order in character class");
        set.push_back({*lo.cp, *hi.cp});
      } else if (lo.cp) {
        set.push_back({*lo.cp, *lo.cp});
      } else {
        set.insert(set.end(), lo.set.begin(), lo.set.end());
      }
    }
    return set_node(negate ? complement_ranges(set) : set);
  }

  Expected<Piece> class_atom() {
    if (peek() == '\\') {
      ++pos_;
      return escape(true);
    }
    BEAM_ASSIGN_OR_RETURN(char32_t cp, code_point());
    return Piece{cp, {}};
  }

  // A quantifier at pos_, if one: {min, max}; advances past it (and a lazy '?').
  std::optional<std::pair<int32_t, int32_t>> quantifier(Status& error) {
    std::optional<std::pair<int32_t, int32_t>> q;
    const char c = peek();
    if (c == '*') q = {0, -1};
    if (c == '+') q = {1, -1};
    if (c == '?') q = {0, 1};
    if (q) {
      ++pos_;
    } else if (c == '{') {
      q = braced_quantifier(error);
      if (!q) return std::nullopt;
    } else {
      return std::nullopt;
    }
    if (peek() == '?') ++pos_;  // lazy: the same language
    return q;
  }

  // {n}, {n,} or {n,m}; a '{' that starts none of them is a literal (nullopt, pos_ unchanged).
  std::optional<std::pair<int32_t, int32_t>> braced_quantifier(Status& error) {
    size_t i = pos_ + 1;
    auto number = [&](int64_t& v) {
      const size_t from = i;
      v = 0;
      while (i < p_.size() && p_[i] >= '0' && p_[i] <= '9') {
        v = std::min<int64_t>(v * 10 + (p_[i] - '0'), int64_t{1} << 40);
        ++i;
      }
      return i > from;
    };
    int64_t lo = 0, hi = -1;
    if (!number(lo)) return std::nullopt;
    if (i < p_.size() && p_[i] == ',') {
      ++i;
      if (!number(hi)) hi = -1;
    } else {
      hi = lo;
    }
    if (i >= p_.size() || p_[i] != '}') return std::nullopt;
    pos_ = i + 1;
    if (lo > kMaxRegexRepeat || hi > kMaxRegexRepeat) {
      error = fail("repetition count above " + std::to_string(kMaxRegexRepeat));
      return std::nullopt;
    }
    if (hi >= 0 && hi < lo) {
      error = fail("repetition range out of order");
      return std::nullopt;
    }
    return std::pair<int32_t, int32_t>{static_cast<int32_t>(lo), static_cast<int32_t>(hi)};
  }

  Expected<RegexNode> alternation(int depth, bool top) {
    RegexNode alt{.kind = RegexNode::Kind::kAlternate};
    while (true) {
      BEAM_ASSIGN_OR_RETURN(RegexNode branch, concat(depth, top));
      alt.children.push_back(std::move(branch));
      if (peek() != '|' || at_end()) break;
      ++pos_;
    }
    return alt;
  }

  Expected<RegexNode> concat(int depth, bool top) {
    RegexNode seq{.kind = RegexNode::Kind::kConcat};
    while (!at_end() && peek() != '|' && peek() != ')') {
      const char c = peek();
      if (c == '^') {
        if (!top || !seq.children.empty())
          return fail(
              "'^' is only supported at the start of the pattern or of a top-level '|' "
              "alternative");
        ++pos_;
        seq.children.push_back(RegexNode{.kind = RegexNode::Kind::kStart});
        continue;
      }
      if (c == '$') {
        ++pos_;
        if (!top || !(at_end() || peek() == '|'))
          return fail(
              "'$' is only supported at the end of the pattern or of a top-level '|' "
              "alternative");
        seq.children.push_back(RegexNode{.kind = RegexNode::Kind::kEnd});
        continue;
      }
      BEAM_ASSIGN_OR_RETURN(RegexNode a, atom(depth));
      Status error = ok_status();
      const auto q = quantifier(error);
      if (!error.ok()) return error.error();
      if (q) {
        a = RegexNode{.kind = RegexNode::Kind::kRepeat,
                      .children = {std::move(a)},
                      .min = q->first,
                      .max = q->second};
        Status again = ok_status();
        const size_t at = pos_;
        if (quantifier(again) || !again.ok()) {
          pos_ = at;
          return fail("nothing to repeat");
        }
      }
      seq.children.push_back(std::move(a));
    }
    return seq;
  }

  Expected<RegexNode> atom(int depth) {
    const char c = peek();
    switch (c) {
      case '(': {
        if (depth >= kMaxGroupDepth) return fail("groups nested too deeply");
        ++pos_;
        if (peek() == '?') {
          if (peek(1) == ':') {
            pos_ += 2;
          } else if (peek(1) == '<' && peek(2) != '=' && peek(2) != '!') {
            const size_t close = p_.find('>', pos_);
            if (close == std::string_view::npos) return fail("unterminated group name");
            pos_ = close + 1;
          } else if (peek(1) == '=' || peek(1) == '!' || peek(1) == '<') {
            return fail("lookaround assertions are not supported");
          } else {
            return fail("unknown group syntax '(?'");
          }
        }
        BEAM_ASSIGN_OR_RETURN(RegexNode inner, alternation(depth + 1, false));
        if (peek() != ')' || at_end()) return fail("unterminated group");
        ++pos_;
        return inner;
      }
      case '[':
        ++pos_;
        return char_class();
      case '.':
        ++pos_;
        return set_node(dot());
      case '\\': {
        ++pos_;
        BEAM_ASSIGN_OR_RETURN(Piece p, escape(false));
        return set_node(p.cp ? Ranges{{*p.cp, *p.cp}} : p.set);
      }
      case '*':
      case '+':
      case '?':
        return fail("nothing to repeat");
      case '{': {
        Status error = ok_status();
        const size_t at = pos_;
        if (braced_quantifier(error) || !error.ok()) {
          pos_ = at;
          return fail("nothing to repeat");
        }
        break;
      }
      default:
        break;
    }
    BEAM_ASSIGN_OR_RETURN(char32_t cp, code_point());
    return set_node({{cp, cp}});
  }

  std::string_view p_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<CodePointRange> normalized_ranges(std::vector<CodePointRange> r) {
  std::vector<CodePointRange> cut;
  for (const CodePointRange& x : r) {
    if (x.hi < kSurrogateLo || x.lo > kSurrogateHi) {
      cut.push_back(x);
      continue;
    }
    if (x.lo < kSurrogateLo) cut.push_back({x.lo, kSurrogateLo - 1});
    if (x.hi > kSurrogateHi) cut.push_back({kSurrogateHi + 1, x.hi});
  }
  std::sort(cut.begin(), cut.end(), [](const auto& a, const auto& b) { return a.lo < b.lo; });
  std::vector<CodePointRange> out;
  for (const CodePointRange& x : cut) {
    if (!out.empty() && x.lo <= out.back().hi + 1)
      out.back().hi = std::max(out.back().hi, x.hi);
    else
      out.push_back(x);
  }
  return out;
}

std::vector<CodePointRange> complement_ranges(const std::vector<CodePointRange>& r) {
  std::vector<CodePointRange> out;
  char32_t next = 0;
  for (const CodePointRange& x : normalized_ranges(r)) {
    if (x.lo > next) out.push_back({next, x.lo - 1});
    next = x.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return normalized_ranges(std::move(out));
}

Expected<RegexNode> parse_regex(std::string_view pattern) {
  return Parser(pattern).parse();
}

}  // namespace beam
