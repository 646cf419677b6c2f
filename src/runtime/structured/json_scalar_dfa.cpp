// Strings: the matcher's own string lexer (json_string_byte / pattern_string_byte) explored over
// every byte, its states crossed with the code points written. Numbers: regular expressions for
// the syntax, the length and each bound (digit ranges split by length and by digit, the
// classic range-to-regex construction), intersected.
#include "runtime/structured/json_scalar_dfa.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/structured/json_matcher.h"
#include "runtime/structured/regex_syntax.h"

namespace beam {
namespace {

std::string where(const JsonGrammar& g, GrammarNodeId node) {
  return g.pointer(node).empty() ? "the schema's root" : "'" + g.pointer(node) + "'";
}

}  // namespace

Expected<std::shared_ptr<const ByteDfa>> json_string_dfa(const JsonGrammar& grammar,
                                                         GrammarNodeId id) {
  const GrammarNode& node = grammar.node(id);
  const ByteDfa* pattern = node.pattern >= 0 ? &grammar.pattern(node.pattern) : nullptr;
  // Without a maximum, the code points past the minimum no longer matter.
  const int64_t cap = node.max_length >= 0 ? node.max_length : node.min_length;
  using Lexer = std::tuple<uint8_t, int32_t, int64_t>;  // phase, pattern state, code points
  constexpr int32_t kOpen = 0, kClosed = 1;             // before the opening quote; after the last
  std::map<Lexer, int32_t> ids;
  std::vector<Lexer> lexers = {{}, {}};
  std::vector<int32_t> table(2 * 256, ByteDfa::kDead);
  std::vector<uint8_t> accepting = {0, 1};
  auto state_of = [&](const Lexer& l) {
    const auto [it, fresh] = ids.emplace(l, static_cast<int32_t>(lexers.size()));
    if (fresh) {
      lexers.push_back(l);
      table.resize(lexers.size() * 256, ByteDfa::kDead);
      accepting.push_back(0);
    }
    return it->second;
  };
  table[static_cast<size_t>(kOpen) * 256 + '"'] = state_of({0, pattern ? pattern->start() : 0, 0});
  for (size_t s = 2; s < lexers.size(); ++s) {
    if (lexers.size() > static_cast<size_t>(kMaxJsonStringStates)) {
      const char* keyword = node.max_length >= 0 ? "maxLength" : "minLength";
      return make_error("'" + grammar.pointer(id) + "/" + keyword + "': \"" + keyword + "\" " +
                        std::to_string(cap) + (pattern ? " beside a pattern or format" : "") +
                        " is too long for a structural tag (more than " +
                        std::to_string(kMaxJsonStringStates) + " automaton states)");
    }
    for (int b = 0; b < 256; ++b) {
      auto [phase, dfa_state, count] = lexers[s];
      const auto c = static_cast<uint8_t>(b);
      const bool counts = phase == 0 && c != '"';  // a character's first byte
      const StringByte r =
          pattern ? pattern_string_byte(*pattern, node.max_length, count, phase, dfa_state, c)
                  : json_string_byte(phase, c);
      int32_t to = ByteDfa::kDead;
      if (r == StringByte::kClose) {
        if (count >= node.min_length) to = kClosed;
      } else if (r == StringByte::kInside) {
        count += counts ? 1 : 0;
        if (node.max_length < 0 || count <= node.max_length)
          to = state_of({phase, dfa_state, std::min(count, cap)});
      }
      table[s * 256 + static_cast<size_t>(b)] = to;
    }
  }
  return ByteDfa::from_table(table, accepting);
}

namespace {

RegexNode lit(char c) {
  const auto u = static_cast<char32_t>(static_cast<uint8_t>(c));
  return RegexNode{.kind = RegexNode::Kind::kSet, .set = {{u, u}}};
}
RegexNode digits(char lo, char hi) {
  return RegexNode{.kind = RegexNode::Kind::kSet,
                   .set = {{static_cast<char32_t>(lo), static_cast<char32_t>(hi)}}};
}
RegexNode text(std::string_view s) {
  RegexNode out{.kind = RegexNode::Kind::kConcat};
  for (char c : s) out.children.push_back(lit(c));
  return out;
}
RegexNode concat(std::vector<RegexNode> parts) {
  return RegexNode{.kind = RegexNode::Kind::kConcat, .children = std::move(parts)};
}
RegexNode either(std::vector<RegexNode> alts) {
  return RegexNode{.kind = RegexNode::Kind::kAlternate, .children = std::move(alts)};
}
RegexNode repeat(RegexNode x, int32_t min, int32_t max) {
  return RegexNode{
      .kind = RegexNode::Kind::kRepeat, .children = {std::move(x)}, .min = min, .max = max};
}
RegexNode any_digits(int32_t min) {
  return repeat(digits('0', '9'), min, -1);
}

// Same-length digit strings from lo to hi (lo <= hi, equal lengths).
RegexNode same_length_range(std::string_view lo, std::string_view hi) {
  if (lo.empty()) return RegexNode{};
  const auto n = static_cast<int32_t>(lo.size());
  if (lo.substr(1).find_first_not_of('0') == std::string_view::npos &&
      hi.substr(1).find_first_not_of('9') == std::string_view::npos)
    return concat({digits(lo[0], hi[0]), repeat(digits('0', '9'), n - 1, n - 1)});
  if (lo[0] == hi[0]) return concat({lit(lo[0]), same_length_range(lo.substr(1), hi.substr(1))});
  std::vector<RegexNode> alts;
  alts.push_back(
      concat({lit(lo[0]), same_length_range(lo.substr(1), std::string(lo.size() - 1, '9'))}));
  if (lo[0] + 1 <= hi[0] - 1)
    alts.push_back(concat({digits(static_cast<char>(lo[0] + 1), static_cast<char>(hi[0] - 1)),
                           repeat(digits('0', '9'), n - 1, n - 1)}));
  alts.push_back(
      concat({lit(hi[0]), same_length_range(std::string(hi.size() - 1, '0'), hi.substr(1))}));
  return either(std::move(alts));
}

// Canonical integers (no leading zeros) from lo to hi, each of either side optional: none below
// lo means from 0, none above hi means every longer integer too.
RegexNode integer_range(int64_t lo, std::optional<int64_t> hi) {
  std::vector<RegexNode> alts;
  const std::string first = std::to_string(lo);
  const std::string last = hi ? std::to_string(*hi) : std::string(first.size(), '9');
  for (size_t len = first.size(); len <= last.size(); ++len) {
    const std::string from = len == first.size() ? first : "1" + std::string(len - 1, '0');
    const std::string to = len == last.size() ? last : std::string(len, '9');
    alts.push_back(same_length_range(from, to));
  }
  if (!hi)
    alts.push_back(concat({digits('1', '9'), any_digits(static_cast<int32_t>(first.size()))}));
  return either(std::move(alts));
}

// Fractions compared with 0.c (c: the bound's decimals): the text after the integer part, either
// nothing (the value's fraction is 0) or '.' and digits, whose value relates to 0.c as `op` says.
enum class Op { kGe, kGt, kLe, kLt };
RegexNode fraction(std::string_view c, Op op) {
  const size_t t =
      c.find_last_not_of('0') == std::string_view::npos ? 0 : c.find_last_not_of('0') + 1;
  const std::string_view sig = c.substr(0, t);  // up to the last nonzero decimal
  const bool zero = t == 0;
  std::vector<RegexNode> alts;  // texts after the dot
  const bool up = op == Op::kGe || op == Op::kGt;
  // A first difference from sig's decimals in the right direction, anything after it.
  for (size_t i = 0; i < t; ++i) {
    const char d = sig[i];
    if (up ? d == '9' : d == '0') continue;
    alts.push_back(
        concat({text(sig.substr(0, i)),
                up ? digits(static_cast<char>(d + 1), '9') : digits('0', static_cast<char>(d - 1)),
                any_digits(0)}));
  }
  switch (op) {
    case Op::kGe:  // sig itself, then anything
      alts.push_back(concat({text(sig), any_digits(zero ? 1 : 0)}));
      break;
    case Op::kGt:  // sig, then a nonzero decimal somewhere
      alts.push_back(concat({text(sig), any_digits(0), digits('1', '9'), any_digits(0)}));
      break;
    case Op::kLe:  // a proper prefix of sig, or sig and zeros
      for (size_t j = 1; j < t; ++j) alts.push_back(text(sig.substr(0, j)));
      alts.push_back(concat({text(sig), repeat(lit('0'), zero ? 1 : 0, -1)}));
      break;
    case Op::kLt:  // a proper prefix of sig
      for (size_t j = 1; j < t; ++j) alts.push_back(text(sig.substr(0, j)));
      break;
  }
  std::vector<RegexNode> out;
  if (!alts.empty()) out.push_back(concat({lit('.'), either(std::move(alts))}));
  // No fraction written: the value's fraction is zero.
  const bool zero_passes = op == Op::kGe ? zero : op == Op::kGt ? false : op == Op::kLe || !zero;
  if (zero_passes) out.push_back(RegexNode{});
  return either(std::move(out));
}

// Magnitudes (unsigned texts: an integer part, maybe a fraction) that relate to m * 10^-d as `op`
// says (m >= 0).
RegexNode magnitude(int64_t m, int32_t d, Op op) {
  int64_t unit = 1;
  for (int32_t i = 0; i < d; ++i) unit *= 10;
  const int64_t whole = m / unit;
  std::string decimals = std::to_string(m % unit + unit).substr(1);  // d digits
  const RegexNode any_fraction = either({RegexNode{}, concat({lit('.'), any_digits(1)})});
  std::vector<RegexNode> alts;
  const bool up = op == Op::kGe || op == Op::kGt;
  if (up)
    alts.push_back(concat({integer_range(whole + 1, std::nullopt), any_fraction}));
  else if (whole > 0)
    alts.push_back(concat({integer_range(0, whole - 1), any_fraction}));
  alts.push_back(concat({text(std::to_string(whole)), fraction(decimals, op)}));
  return either(std::move(alts));
}

// Signed texts whose value v satisfies v >= bound (lower) or v <= bound (upper), in units of
// 10^-d, open or closed. A minus sign before a magnitude of zero is the value zero.
RegexNode signed_bound(int64_t bound, int32_t d, bool lower, bool open) {
  const RegexNode zero =
      concat({lit('0'), either({RegexNode{}, concat({lit('.'), repeat(lit('0'), 1, -1)})})});
  const RegexNode any_magnitude = magnitude(0, d, Op::kGe);
  const Op away = open ? Op::kGt : Op::kGe, toward = open ? Op::kLt : Op::kLe;
  // The side of zero the bound lies on decides which signs pass whole.
  if (lower) {
    if (bound > 0 || (bound == 0 && open)) return magnitude(bound, d, away);
    if (bound == 0) return either({any_magnitude, concat({lit('-'), zero})});
    return either({any_magnitude, concat({lit('-'), magnitude(-bound, d, toward)})});
  }
  if (bound < 0 || (bound == 0 && open)) return concat({lit('-'), magnitude(-bound, d, away)});
  if (bound == 0) return either({zero, concat({lit('-'), any_magnitude})});
  return either({magnitude(bound, d, toward), concat({lit('-'), any_magnitude})});
}

Expected<std::shared_ptr<const ByteDfa>> intersect_all(std::vector<RegexNode> parts) {
  std::shared_ptr<const ByteDfa> out;
  for (const RegexNode& part : parts) {
    BEAM_ASSIGN_OR_RETURN(std::shared_ptr<const ByteDfa> dfa, ByteDfa::from_regex(part));
    if (out) {
      BEAM_ASSIGN_OR_RETURN(out, ByteDfa::intersect(*out, *dfa));
    } else {
      out = std::move(dfa);
    }
  }
  return out;
}

}  // namespace

Expected<std::shared_ptr<const ByteDfa>> json_number_dfa(const JsonGrammar& grammar,
                                                         GrammarNodeId id) {
  const GrammarNode& node = grammar.node(id);
  const bool integer = node.kind == GrammarKind::kInteger;
  std::vector<RegexNode> syntax = {repeat(lit('-'), 0, 1),
                                   either({lit('0'), concat({digits('1', '9'), any_digits(0)})})};
  if (!integer) {
    syntax.push_back(repeat(concat({lit('.'), any_digits(1)}), 0, 1));
    if (!node.bounded())
      syntax.push_back(repeat(concat({either({lit('e'), lit('E')}),
                                      repeat(either({lit('+'), lit('-')}), 0, 1), any_digits(1)}),
                              0, 1));
  }
  std::vector<RegexNode> parts = {
      concat(std::move(syntax)),
      repeat(either({digits('0', '9'), lit('-'), lit('+'), lit('.'), lit('e'), lit('E')}), 1,
             kMaxJsonNumberBytes)};
  const int32_t d = integer ? 0 : node.bound_decimals;
  if (node.min_value != std::numeric_limits<int64_t>::min())
    parts.push_back(signed_bound(node.min_value, d, /*lower=*/true, node.min_exclusive));
  if (node.max_value != std::numeric_limits<int64_t>::max())
    parts.push_back(signed_bound(node.max_value, d, /*lower=*/false, node.max_exclusive));
  auto dfa = intersect_all(std::move(parts));
  if (!dfa.ok())
    return make_error(where(grammar, id) +
                      ": the number's bounds are too complex for a "
                      "structural tag (" +
                      dfa.error().message + ")");
  return dfa;
}

}  // namespace beam
