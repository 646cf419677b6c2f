// JsonMatcher's byte step. Each stack is copied into a local frame array, changed, and appended
// to the output state; a fork (anyOf, enum values, object keys) appends one stack per survivor.
#include "runtime/structured/json_matcher.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/check.h"

namespace beam {
namespace {

constexpr int kMaxFrames = kMaxJsonDepth + 2;  // the root, containers, one scalar or key

// FNV-1a over a stack's frames, field by field (MatchFrame has padding).
uint64_t json_stack_hash(std::span<const MatchFrame> stack) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (const MatchFrame& f : stack) {
    mix(static_cast<uint32_t>(f.node));
    mix(static_cast<uint64_t>(f.kind) | uint64_t{f.phase} << 8 | uint64_t{f.ws} << 16);
    mix(static_cast<uint32_t>(f.a));
    mix(static_cast<uint32_t>(f.b));
  }
  return h;
}

// kObject phases.
enum : uint8_t {
  kObjOpen,     // after '{': a key or '}'
  kObjKeyNext,  // after ',': a key
  kObjKey,      // inside a key (a key frame above)
  kObjColon,    // after a key: ':'
  kObjValue,    // inside a value (a value frame above)
  kObjComma,    // after a value: ',' or '}'
};
// kArray phases.
enum : uint8_t { kArrOpen, kArrItem, kArrComma };
// kNumber phases.
enum : uint8_t {
  kNumStart,
  kNumMinus,
  kNumZero,
  kNumInt,
  kNumDot,
  kNumFrac,
  kNumExp,
  kNumExpSign,
  kNumExpDigits
};

bool is_ws(uint8_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_digit(uint8_t c) {
  return c >= '0' && c <= '9';
}
bool is_hex(uint8_t c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// One whitespace byte c at a position that allows whitespace. A run is one space, or a newline
// and up to kMaxJsonIndent spaces or tabs (ws: 0 none yet, 1 a space, 2 + indent after a newline).
bool take_ws(MatchFrame& f, uint8_t c) {
  if (f.ws == 0 && (c == ' ' || c == '\n')) {
    f.ws = c == ' ' ? 1 : 2;
    return true;
  }
  if (f.ws < 2 || (c != ' ' && c != '\t') || f.ws - 2 >= kMaxJsonIndent) return false;
  f.ws++;
  return true;
}

// A bounded number's progress in units u = 10^-F (F: the node's bound_decimals): the sign; before
// the dot the integer part I read so far, after it the value's first F decimals as well (scaled =
// I * 10^F + those digits); both saturated at 2^31. fraction_digits: decimals written, up to F + 1
// (past F); rest_nonzero: a nonzero decimal past the F-th (the value is then above scaled * u).
struct NumberProgress {
  bool negative = false;
  int64_t scaled = 0;
  bool int_digits = false;
  bool in_fraction = false;
  int32_t fraction_digits = 0;
  bool rest_nonzero = false;
};

constexpr int64_t kScaledCap = int64_t{1} << 31;  // above every bound (<= kMaxIntegerBound)

int64_t pow10(int32_t d) {
  int64_t p = 1;
  while (d-- > 0) p *= 10;
  return p;
}

// The magnitudes m (in units u) whose signed value lies in the node's bounds: A <= m (A < m when
// open_a) and m <= B (m < B when open_b; no B: unbounded).
struct MagnitudeRange {
  int64_t a = 0;
  bool open_a = false;
  std::optional<int64_t> b;
  bool open_b = false;
};

std::optional<MagnitudeRange> magnitude_range(const GrammarNode& node, bool negative) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(),
                    kMax = std::numeric_limits<int64_t>::max();
  MagnitudeRange r;
  // The bound that limits m from below / above for this sign, as a signed value and its openness.
  const bool has_low = negative ? node.max_value != kMax : node.min_value != kMin;
  const int64_t low = negative ? -node.max_value : node.min_value;
  const bool low_open = negative ? node.max_exclusive : node.min_exclusive;
  const bool has_high = negative ? node.min_value != kMin : node.max_value != kMax;
  const int64_t high = negative ? -node.min_value : node.max_value;
  if (has_low && low >= 0) {
    r.a = low;
    r.open_a = low_open;
  }
  if (has_high) {
    if (high < 0 || (high == 0 && (negative ? node.min_exclusive : node.max_exclusive)))
      return std::nullopt;
    r.b = high;
    r.open_b = negative ? node.min_exclusive : node.max_exclusive;
  }
  return r;
}

// Whether some magnitude between lo and hi (each end open or closed; the numbers between them
// are dense enough: any decimal may follow) lies in r.
bool meets(const MagnitudeRange& r, int64_t lo, bool lo_open, int64_t hi, bool hi_open) {
  if (r.a > lo || (r.a == lo && r.open_a)) {
    lo = r.a;
    lo_open = r.open_a;
  }
  if (r.b && (*r.b < hi || (*r.b == hi && r.open_b))) {
    hi = *r.b;
    hi_open = r.open_b;
  }
  return lo < hi || (lo == hi && !lo_open && !hi_open);
}

// Whether the number can still end inside the node's bounds (fractions only for kNumber).
bool number_feasible(const GrammarNode& node, const NumberProgress& p) {
  const std::optional<MagnitudeRange> r = magnitude_range(node, p.negative);
  if (!r) return false;
  const int32_t decimals = node.bound_decimals;
  if (p.in_fraction) {  // the values from scaled up to the next step of the digits written
    if (p.fraction_digits > decimals)
      return meets(*r, p.scaled, p.rest_nonzero, p.scaled + 1, true);
    return meets(*r, p.scaled, false, p.scaled + pow10(decimals - p.fraction_digits), true);
  }
  if (!p.int_digits) return meets(*r, 0, false, kScaledCap * kScaledCap, false);
  // Integer parts I in [first, last]: a number's values [I, I + 1), an integer's I.
  const int64_t unit = pow10(decimals);
  auto parts = [&](int64_t first, int64_t last) {
    return node.kind == GrammarKind::kNumber
               ? meets(*r, first * unit, false, (last + 1) * unit, true)
               : meets(*r, first, false, last, false);
  };
  if (p.scaled == 0) return parts(0, 0);    // "0" and "-0" take no more digits
  for (int64_t span = 1;; span *= 10) {     // the part read followed by log10(span) digits
    const int64_t first = p.scaled * span;  // <= 2^62: the loop ends by span ~ 2^31
    if (parts(first, first + span - 1)) return true;
    if (first > kScaledCap) return false;  // longer parts lie above every bound
  }
}

// A complete bounded number's value is inside the bounds.
bool number_in_range(const GrammarNode& node, const NumberProgress& p) {
  const std::optional<MagnitudeRange> r = magnitude_range(node, p.negative);
  if (!r) return false;
  const int64_t m =
      p.in_fraction ? p.scaled : std::min(p.scaled * pow10(node.bound_decimals), kScaledCap);
  return p.rest_nonzero ? meets(*r, m, true, m + 1, true) : meets(*r, m, false, m, false);
}

NumberProgress progress_of(const MatchFrame& f) {
  return {(f.ws & 1) != 0,
          static_cast<int64_t>(static_cast<uint32_t>(f.b)),
          f.phase != kNumStart && f.phase != kNumMinus,
          f.phase == kNumDot || f.phase == kNumFrac,
          (f.ws >> 2) & 7,
          (f.ws & 2) != 0};
}

bool number_complete(const MatchFrame& f, const GrammarNode& node) {
  const bool complete =
      f.phase == kNumZero || f.phase == kNumInt || f.phase == kNumFrac || f.phase == kNumExpDigits;
  if (!complete || !node.bounded()) return complete;
  return number_in_range(node, progress_of(f));
}

// Advances a number frame by c; false when c cannot continue it (a bounded number: also when no
// continuation stays inside its bounds; it writes no exponent).
bool number_byte(MatchFrame& f, const GrammarNode& node, uint8_t c) {
  const bool integer = node.kind == GrammarKind::kInteger;
  if (f.a >= kMaxJsonNumberBytes) return false;
  const bool exp = !integer && !node.bounded() && (c == 'e' || c == 'E');
  const bool dot = !integer && c == '.';
  int next = -1;
  switch (f.phase) {
    case kNumStart:
      next = c == '-' ? kNumMinus : c == '0' ? kNumZero : is_digit(c) ? kNumInt : -1;
      break;
    case kNumMinus:
      next = c == '0' ? kNumZero : is_digit(c) ? kNumInt : -1;
      break;
    case kNumZero:
      next = dot ? kNumDot : exp ? kNumExp : -1;
      break;
    case kNumInt:
      next = is_digit(c) ? kNumInt : dot ? kNumDot : exp ? kNumExp : -1;
      break;
    case kNumDot:
      next = is_digit(c) ? kNumFrac : -1;
      break;
    case kNumFrac:
      next = is_digit(c) ? kNumFrac : exp ? kNumExp : -1;
      break;
    case kNumExp:
      next = (c == '+' || c == '-') ? kNumExpSign : is_digit(c) ? kNumExpDigits : -1;
      break;
    case kNumExpSign:
      next = is_digit(c) ? kNumExpDigits : -1;
      break;
    case kNumExpDigits:
      next = is_digit(c) ? kNumExpDigits : -1;
      break;
    default:
      break;
  }
  if (next < 0) return false;
  if (node.bounded()) {
    NumberProgress p = progress_of(f);
    const int32_t decimals = node.bound_decimals;
    p.negative = p.negative || c == '-';
    p.int_digits = next != kNumMinus;
    if (next == kNumDot) {
      p.in_fraction = true;
      p.scaled = std::min(p.scaled * pow10(decimals), kScaledCap);
    } else if (is_digit(c) && !p.in_fraction) {
      p.scaled = std::min(p.scaled * 10 + (c - '0'), kScaledCap);
    } else if (is_digit(c)) {
      if (p.fraction_digits < decimals)
        p.scaled =
            std::min(p.scaled + (c - '0') * pow10(decimals - p.fraction_digits - 1), kScaledCap);
      else if (c != '0')
        p.rest_nonzero = true;
      p.fraction_digits = std::min(p.fraction_digits + 1, decimals + 1);
    }
    if (!number_feasible(node, p)) return false;
    f.ws = static_cast<uint16_t>((p.negative ? 1 : 0) | (p.rest_nonzero ? 2 : 0) |
                                 (p.fraction_digits << 2));
    f.b = static_cast<int32_t>(static_cast<uint32_t>(p.scaled));
  }
  f.phase = static_cast<uint8_t>(next);
  f.a++;
  return true;
}

}  // namespace

StringByte json_string_byte(uint8_t& phase, uint8_t c) {
  // Phases 6-12: inside a UTF-8 sequence (RFC 3629: no overlong forms, surrogates or code points
  // past U+10FFFF). Each names the next byte's range and the phase after it.
  struct Utf8Phase {
    uint8_t lo, hi, next;
  };
  constexpr Utf8Phase kUtf8[] = {{0x80, 0xBF, 0}, {0x80, 0xBF, 6}, {0x80, 0xBF, 7}, {0xA0, 0xBF, 6},
                                 {0x80, 0x9F, 6}, {0x90, 0xBF, 7}, {0x80, 0x8F, 7}};
  switch (phase) {
    case 0:
      if (c == '"') return StringByte::kClose;
      if (c == '\\')
        phase = 1;
      else if (c < 0x20)
        return StringByte::kReject;
      else if (c >= 0x80) {
        if (c >= 0xC2 && c <= 0xDF)
          phase = 6;
        else if (c == 0xE0)
          phase = 9;
        else if (c == 0xED)
          phase = 10;
        else if (c >= 0xE1 && c <= 0xEF)
          phase = 7;
        else if (c == 0xF0)
          phase = 11;
        else if (c >= 0xF1 && c <= 0xF3)
          phase = 8;
        else if (c == 0xF4)
          phase = 12;
        else
          return StringByte::kReject;
      }
      return StringByte::kInside;
    case 1:
      if (c == 'u')
        phase = 5;
      else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' ||
               c == 't')
        phase = 0;
      else
        return StringByte::kReject;
      return StringByte::kInside;
    case 2:
    case 3:
    case 4:
    case 5:
      if (!is_hex(c)) return StringByte::kReject;
      phase = phase == 2 ? 0 : static_cast<uint8_t>(phase - 1);
      return StringByte::kInside;
    default: {
      const Utf8Phase& u = kUtf8[phase - 6];
      if (c < u.lo || c > u.hi) return StringByte::kReject;
      phase = u.next;
      return StringByte::kInside;
    }
  }
}

StringByte pattern_string_byte(const ByteDfa& dfa, int64_t max_length, int64_t code_points,
                               uint8_t& phase, int32_t& dfa_state, uint8_t c) {
  uint8_t p = phase;
  const StringByte r = json_string_byte(p, c);
  if (r == StringByte::kReject) return r;
  if (r == StringByte::kClose) return dfa.accepting(dfa_state) ? r : StringByte::kReject;
  const int64_t counted = code_points + (phase == 0 ? 1 : 0);  // c is not the quote here
  // Whether `state` can still reach a match within the length bound.
  auto fits = [&](int32_t state) {
    return state != ByteDfa::kDead &&
           (max_length < 0 || counted + dfa.min_code_points(state) <= max_length);
  };
  constexpr std::string_view kEscaped = "\"\\/bfnrt", kMeans = "\"\\/\b\f\n\r\t";
  int value = -1;  // the value's byte this one completes, if any
  if (phase == 1) {
    const size_t at = kEscaped.find(static_cast<char>(c));
    if (at == std::string_view::npos) return StringByte::kReject;  // 'u'
    value = static_cast<uint8_t>(kMeans[at]);
  } else if (phase >= 6 || c != '\\') {
    value = c;  // plain text, a UTF-8 lead or continuation byte
  } else if (std::none_of(kMeans.begin(), kMeans.end(), [&](char m) {
               return fits(dfa.next(dfa_state, static_cast<uint8_t>(m)));
             })) {
    return StringByte::kReject;  // a backslash that no escape the pattern allows can follow
  }
  if (value >= 0) {
    const int32_t next = dfa.next(dfa_state, static_cast<uint8_t>(value));
    if (!fits(next)) return StringByte::kReject;
    dfa_state = next;
  }
  phase = p;
  return r;
}

JsonMatcher::JsonMatcher(std::shared_ptr<const JsonGrammar> grammar)
    : grammar_(std::move(grammar)) {
  BEAM_CHECK(grammar_ != nullptr);
}

MatchState JsonMatcher::initial() const {
  MatchState s;
  s.frames = {MatchFrame{.kind = FrameKind::kRoot},
              MatchFrame{.node = grammar_->root(), .kind = FrameKind::kValue}};
  s.ends = {2};
  return s;
}

void JsonMatcher::emit(const MatchFrame* f, int n, MatchState& out) {
  out.frames.insert(out.frames.end(), f, f + n);
  out.ends.push_back(static_cast<uint32_t>(out.frames.size()));
}

// Removes stacks equal to an earlier one (ambiguous parses that converged), comparing top first:
// each against every kept one while there are few, else only against kept ones of the same hash
// (an enum of 30,000 values forks as many stacks; comparing all pairs took 2.3 s a mask).
void JsonMatcher::dedupe(MatchState& out, size_t first_stack) {
  if (out.ends.size() - first_stack < 2) return;
  constexpr size_t kPairwiseStacks = 16;
  const bool pairwise = out.num_stacks() <= kPairwiseStacks;
  MatchState kept;
  std::unordered_map<uint64_t, std::vector<uint32_t>> kept_by_hash;  // hash -> kept stacks
  auto same = [](std::span<const MatchFrame> a, std::span<const MatchFrame> b) {
    return a.size() == b.size() && std::equal(a.rbegin(), a.rend(), b.rbegin());
  };
  for (size_t i = 0; i < out.num_stacks(); ++i) {
    std::span<const MatchFrame> s = out.stack(i);
    bool dup = false;
    if (pairwise) {
      for (size_t j = 0; j < kept.num_stacks() && !dup; ++j) dup = same(s, kept.stack(j));
    } else {
      std::vector<uint32_t>& bucket = kept_by_hash[json_stack_hash(s)];
      for (size_t j = 0; j < bucket.size() && !dup; ++j) dup = same(s, kept.stack(bucket[j]));
      if (!dup) bucket.push_back(static_cast<uint32_t>(kept.num_stacks()));
    }
    if (!dup) emit(s.data(), static_cast<int>(s.size()), kept);
  }
  out.frames.assign(kept.frames.begin(), kept.frames.end());
  out.ends.assign(kept.ends.begin(), kept.ends.end());
}

bool JsonMatcher::advance(const MatchState& in, uint8_t byte, MatchState& out) const {
  out.clear();
  for (size_t i = 0; i < in.num_stacks(); ++i) {
    std::span<const MatchFrame> s = in.stack(i);
    step(s.data(), static_cast<int>(s.size()), byte, out);
  }
  dedupe(out, 0);
  return !out.dead();
}

bool JsonMatcher::advance_bytes(MatchState& state, std::string_view bytes,
                                MatchState& scratch) const {
  MatchState cur = state;
  for (char ch : bytes) {
    if (!advance(cur, static_cast<uint8_t>(ch), scratch)) return false;
    std::swap(cur, scratch);
  }
  state = std::move(cur);
  return true;
}

namespace {

// The parent of a value that just ended (already popped) moves past it.
void value_done(const JsonGrammar& g, MatchFrame* f, int n) {
  MatchFrame& p = f[n - 1];
  p.ws = 0;
  switch (p.kind) {
    case FrameKind::kRoot:
      p.phase = 1;
      break;
    case FrameKind::kObject:
      if (p.phase == kObjKey) {
        p.phase = kObjColon;
      } else {
        p.phase = kObjComma;
        p.a = p.b >= 0 ? p.b + 1 : static_cast<int32_t>(g.node(p.node).properties.size());
      }
      break;
    case FrameKind::kArray:
      p.phase = kArrComma;
      p.a++;
      break;
    default:
      BEAM_CHECK(false) << "a scalar frame cannot hold a value";
  }
}

bool required_from(const GrammarNode& obj, int32_t from) {
  for (size_t j = static_cast<size_t>(from); j < obj.properties.size(); ++j)
    if (obj.properties[j].required) return true;
  return false;
}

GrammarNodeId item_node(const GrammarNode& arr, int32_t index) {
  if (static_cast<size_t>(index) < arr.prefix_items.size())
    return arr.prefix_items[static_cast<size_t>(index)];
  return arr.items;
}

bool more_items(const GrammarNode& arr, int32_t count) {
  return (arr.max_items < 0 || count < arr.max_items) && item_node(arr, count) >= 0;
}

}  // namespace

// After '"' where a key may start: one stack per key it can be (declared keys from the next
// property up to the next required one, and an extra key when the object takes them).
void JsonMatcher::push_key_candidates(MatchFrame* f, int n, MatchState& out) const {
  if (n + 1 > kMaxFrames) return;
  const GrammarNode& obj = grammar_->node(f[n - 1].node);
  f[n - 1].phase = kObjKey;
  f[n - 1].ws = 0;
  for (size_t j = static_cast<size_t>(f[n - 1].a); j < obj.properties.size(); ++j) {
    f[n - 1].b = static_cast<int32_t>(j);
    f[n] = MatchFrame{.node = obj.properties[j].key, .kind = FrameKind::kLiteral};
    emit(f, n + 1, out);
    if (obj.properties[j].required) return;
  }
  if (obj.additional < 0) return;
  f[n - 1].b = -1;
  f[n] = MatchFrame{.node = grammar_->any_string_node(), .kind = FrameKind::kString};
  emit(f, n + 1, out);
}

// The top frame is a kValue and c is not whitespace: c starts the value.
void JsonMatcher::start_value(MatchFrame* f, int n, uint8_t c, MatchState& out) const {
  MatchFrame& top = f[n - 1];
  const GrammarNode& node = grammar_->node(top.node);
  switch (node.kind) {
    case GrammarKind::kAny: {
      const JsonGrammar& g = *grammar_;
      GrammarNodeId to = c == '{'                    ? g.any_object_node()
                         : c == '['                  ? g.any_array_node()
                         : c == '"'                  ? g.any_string_node()
                         : (c == '-' || is_digit(c)) ? g.any_number_node()
                         : c == 't'                  ? g.true_node()
                         : c == 'f'                  ? g.false_node()
                         : c == 'n'                  ? g.null_node()
                                                     : -1;
      if (to < 0) return;
      top.node = to;
      start_value(f, n, c, out);
      return;
    }
    case GrammarKind::kAnyOf: {
      // Nested anyOfs: each distinct alternative that is not itself an anyOf starts once, in
      // the order a depth-first walk meets them; alternatives shared through $refs would
      // otherwise start once per path (a chain of 20 anyOfs of one $ref twice took 24 s per
      // mask). A flat anyOf starts its alternatives as they are.
      const bool nested = std::any_of(
          node.alternatives.begin(), node.alternatives.end(),
          [&](GrammarNodeId a) { return grammar_->node(a).kind == GrammarKind::kAnyOf; });
      std::vector<GrammarNodeId> leaves;
      if (nested) {
        std::vector<GrammarNodeId> pending(node.alternatives.rbegin(), node.alternatives.rend());
        std::unordered_set<GrammarNodeId> seen = {top.node};
        while (!pending.empty()) {
          const GrammarNodeId alt = pending.back();
          pending.pop_back();
          if (!seen.insert(alt).second) continue;
          const GrammarNode& a = grammar_->node(alt);
          if (a.kind == GrammarKind::kAnyOf)
            pending.insert(pending.end(), a.alternatives.rbegin(), a.alternatives.rend());
          else
            leaves.push_back(alt);
        }
      }
      MatchFrame g[kMaxFrames];
      for (GrammarNodeId leaf : nested ? leaves : node.alternatives) {
        std::copy(f, f + n, g);
        g[n - 1].node = leaf;
        start_value(g, n, c, out);
      }
      return;
    }
    case GrammarKind::kObject:
    case GrammarKind::kArray:
      // Frames 1 .. n - 1 are containers once this value is one.
      if (c != (node.kind == GrammarKind::kObject ? '{' : '[') || n - 1 > kMaxJsonDepth) return;
      top = MatchFrame{
          .node = top.node,
          .kind = node.kind == GrammarKind::kObject ? FrameKind::kObject : FrameKind::kArray,
          .b = -1};
      emit(f, n, out);
      return;
    case GrammarKind::kString:
      if (c != '"') return;
      top = MatchFrame{.node = top.node, .kind = FrameKind::kString};
      emit(f, n, out);
      return;
    case GrammarKind::kNumber:
    case GrammarKind::kInteger:
      top = MatchFrame{.node = top.node, .kind = FrameKind::kNumber};
      if (number_byte(top, node, c)) emit(f, n, out);
      return;
    case GrammarKind::kLiteral: {
      MatchFrame g[kMaxFrames];
      for (LiteralId lit : node.literals) {
        const std::string& text = grammar_->literal(lit);
        if (static_cast<uint8_t>(text[0]) != c) continue;
        std::copy(f, f + n, g);
        g[n - 1] = MatchFrame{.node = lit, .kind = FrameKind::kLiteral, .a = 1};
        int m = n;
        if (text.size() == 1) value_done(*grammar_, g, --m);
        emit(g, m, out);
      }
      return;
    }
  }
}

void JsonMatcher::step(const MatchFrame* in, int n, uint8_t c, MatchState& out) const {
  MatchFrame f[kMaxFrames];
  std::copy(in, in + n, f);
  const JsonGrammar& g = *grammar_;
  for (;;) {
    MatchFrame& top = f[n - 1];
    // Whitespace before a value or between a container's tokens.
    const bool takes_ws = top.kind == FrameKind::kValue || top.kind == FrameKind::kObject ||
                          top.kind == FrameKind::kArray;
    if (takes_ws && is_ws(c)) {
      if (take_ws(top, c)) emit(f, n, out);
      return;
    }
    switch (top.kind) {
      case FrameKind::kRoot:
        return;  // the root value is complete: nothing may follow
      case FrameKind::kValue:
        start_value(f, n, c, out);
        return;
      case FrameKind::kString: {
        const GrammarNode& node = g.node(top.node);
        const bool counts = top.phase == 0 && c != '"';  // a character's first byte
        uint8_t phase = top.phase;
        const StringByte r = node.pattern < 0
                                 ? json_string_byte(phase, c)
                                 : pattern_string_byte(g.pattern(node.pattern), node.max_length,
                                                       top.a, phase, top.b, c);
        if (r == StringByte::kReject) return;
        if (r == StringByte::kClose) {
          if (top.a < node.min_length) return;
          value_done(g, f, --n);
        } else {
          top.phase = phase;
          if (counts) top.a++;
          if (node.max_length >= 0 && top.a > node.max_length) return;
        }
        emit(f, n, out);
        return;
      }
      case FrameKind::kNumber: {
        if (number_byte(top, g.node(top.node), c)) {
          emit(f, n, out);
          return;
        }
        if (!number_complete(top, g.node(top.node))) return;
        value_done(g, f, --n);
        continue;  // c belongs to the parent
      }
      case FrameKind::kLiteral: {
        const std::string& text = g.literal(top.node);
        if (static_cast<uint8_t>(text[static_cast<size_t>(top.a)]) != c) return;
        if (static_cast<size_t>(++top.a) == text.size()) value_done(g, f, --n);
        emit(f, n, out);
        return;
      }
      case FrameKind::kObject: {
        const GrammarNode& obj = g.node(top.node);
        switch (top.phase) {
          case kObjOpen:
          case kObjKeyNext:
            if (c == '"') push_key_candidates(f, n, out);
            if (c == '}' && top.phase == kObjOpen && !required_from(obj, top.a)) {
              value_done(g, f, --n);
              emit(f, n, out);
            }
            return;
          case kObjColon:
            if (c != ':' || n >= kMaxFrames) return;
            top.phase = kObjValue;
            top.ws = 0;
            f[n++] =
                MatchFrame{.node = top.b >= 0 ? obj.properties[static_cast<size_t>(top.b)].value
                                              : obj.additional,
                           .kind = FrameKind::kValue};
            emit(f, n, out);
            return;
          case kObjComma:
            if (c == ',' &&
                (static_cast<size_t>(top.a) < obj.properties.size() || obj.additional >= 0)) {
              top.phase = kObjKeyNext;
              top.ws = 0;
              emit(f, n, out);
            } else if (c == '}' && !required_from(obj, top.a)) {
              value_done(g, f, --n);
              emit(f, n, out);
            }
            return;
          default:
            BEAM_CHECK(false) << "object frame on top inside a key or value";
        }
        return;
      }
      case FrameKind::kArray: {
        const GrammarNode& arr = g.node(top.node);
        if (c == ']' && top.a >= arr.min_items) {
          value_done(g, f, --n);
          emit(f, n, out);
          return;
        }
        if (top.phase == kArrComma) {
          if (c != ',' || !more_items(arr, top.a) || n >= kMaxFrames) return;
          top.phase = kArrItem;
          top.ws = 0;
          f[n++] = MatchFrame{.node = item_node(arr, top.a), .kind = FrameKind::kValue};
          emit(f, n, out);
          return;
        }
        // kArrOpen: c starts the first item.
        if (!more_items(arr, 0) || n >= kMaxFrames) return;
        top.phase = kArrItem;
        top.ws = 0;
        f[n++] = MatchFrame{.node = item_node(arr, 0), .kind = FrameKind::kValue};
        continue;
      }
    }
  }
}

bool JsonMatcher::can_end(const MatchState& state) const {
  MatchFrame f[kMaxFrames];
  for (size_t i = 0; i < state.num_stacks(); ++i) {
    std::span<const MatchFrame> s = state.stack(i);
    int n = static_cast<int>(s.size());
    std::copy(s.begin(), s.end(), f);
    while (f[n - 1].kind == FrameKind::kNumber &&
           number_complete(f[n - 1], grammar_->node(f[n - 1].node)))
      value_done(*grammar_, f, --n);
    if (f[n - 1].kind == FrameKind::kRoot && f[n - 1].phase == 1) return true;
  }
  return false;
}

}  // namespace beam
