// Oniguruma → PCRE2 pattern translation (see regex_translate.h).
#include "text/regex_translate.h"

#include <cctype>
#include <vector>

namespace beam::text {

namespace {

// Oniguruma's Unicode classes, spelled with properties PCRE2 10.42 knows (same sets as the JS port).
constexpr std::string_view kWordChars =
    "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}";
constexpr std::string_view kHexChars = "0-9A-Fa-f";

std::string word_class(bool negated) {
  return std::string(negated ? "[^" : "[") + std::string(kWordChars) + "]";
}

std::string word_boundary(bool negated) {
  const std::string w = word_class(false);
  if (negated) return "(?:(?<!" + w + ")(?!" + w + ")|(?<=" + w + ")(?=" + w + "))";
  return "(?:(?<!" + w + ")(?=" + w + ")|(?<=" + w + ")(?!" + w + "))";
}

bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char other_case(char c) { return c >= 'a' && c <= 'z' ? c - 32 : c + 32; }
bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

class Translator {
 public:
  explicit Translator(std::string_view pattern) : in_(pattern) {}

  Expected<std::string> run() {
    while (pos_ < in_.size()) {
      Status s = step();
      if (!s.ok()) return s.error();
    }
    if (!groups_.empty()) return fail("unbalanced '('");
    return out_;
  }

 private:
  struct Group {
    size_t out_start;
    bool fold;
  };

  Error fail(const std::string& what) const {
    return make_error("regex: " + what + " at byte " + std::to_string(pos_) +
                      " is not supported in pattern '" + std::string(in_) + "'");
  }

  void emit_atom(std::string_view text) {
    atom_start_ = out_.size();
    out_ += text;
    last_was_quantifier_ = false;
  }

  Status step() {
    const char c = in_[pos_];
    switch (c) {
      case '\\': return escape();
      case '[': return char_class();
      case '(': return open_group();
      case ')':
        if (groups_.empty()) return fail("unbalanced ')'");
        out_ += ')';
        atom_start_ = groups_.back().out_start;
        fold_ = groups_.back().fold;
        groups_.pop_back();
        last_was_quantifier_ = false;
        ++pos_;
        return ok_status();
      case '|':
        out_ += '|';
        atom_start_ = std::string::npos;
        last_was_quantifier_ = false;
        ++pos_;
        return ok_status();
      case '.': emit_atom("[^\\n]"); ++pos_; return ok_status();
      case '^': emit_atom("(?<![^\\n])"); ++pos_; return ok_status();
      case '$': emit_atom("(?![^\\n])"); ++pos_; return ok_status();
      case ']': emit_atom("\\]"); ++pos_; return ok_status();
      case '}': emit_atom("\\}"); ++pos_; return ok_status();
      case '{': return brace();
      case '*':
      case '+':
      case '?':
        // A quantifier after a quantifier is possessive (+) or lazy (?) in both engines.
        out_ += c;
        last_was_quantifier_ = !last_was_quantifier_;
        ++pos_;
        return ok_status();
      default: break;
    }
    const size_t len = static_cast<size_t>(utf8_length(c));
    if (fold_ && is_ascii_letter(c)) {
      emit_atom(std::string("[") + c + other_case(c) + "]");
    } else if (fold_ && static_cast<unsigned char>(c) >= 0x80) {
      emit_atom("(?i:" + std::string(in_.substr(pos_, len)) + ")");
    } else {
      emit_atom(in_.substr(pos_, len));
    }
    pos_ += len;
    return ok_status();
  }

  static int utf8_length(char lead) {
    const auto b = static_cast<unsigned char>(lead);
    return b < 0xC0 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  }

  // {n}, {n,}, {n,m}, {,m}: a quantifier after an atom, else a literal brace. Oniguruma reads
  // "{n,m}+" as a repeat of the interval, not as a possessive interval.
  Status brace() {
    size_t end = pos_ + 1;
    auto digits = [&] {
      const size_t from = end;
      while (end < in_.size() && std::isdigit(static_cast<unsigned char>(in_[end]))) ++end;
      return end > from;
    };
    const bool lower = digits();
    bool upper = false;
    const bool comma = end < in_.size() && in_[end] == ',';
    if (comma) {
      ++end;
      upper = digits();
    }
    const bool valid = end < in_.size() && in_[end] == '}' && (lower || upper);
    if (!valid || atom_start_ == std::string::npos) {
      emit_atom("\\{");
      ++pos_;
      return ok_status();
    }
    std::string body(in_.substr(pos_ + 1, end - pos_ - 1));
    if (!lower) body = "0" + body;  // {,m} means {0,m}
    pos_ = end + 1;
    if (pos_ < in_.size() && (in_[pos_] == '+' || in_[pos_] == '*')) {
      out_ = out_.substr(0, atom_start_) + "(?:" + out_.substr(atom_start_) + "{" + body + "})" +
             in_[pos_];
      ++pos_;
    } else {
      out_ += "{" + body + "}";
    }
    last_was_quantifier_ = true;
    return ok_status();
  }

  Status open_group() {
    std::string_view rest = in_.substr(pos_);
    groups_.push_back({out_.size(), fold_});
    last_was_quantifier_ = false;
    if (rest.starts_with("(?i:")) {
      fold_ = true;
      out_ += "(?:";
      pos_ += 4;
      return ok_status();
    }
    for (std::string_view prefix : {"(?:", "(?=", "(?!", "(?<=", "(?<!", "(?>"}) {
      if (rest.starts_with(prefix)) {
        out_ += prefix;
        pos_ += prefix.size();
        return ok_status();
      }
    }
    if (rest.starts_with("(?<") || rest.starts_with("(?'")) {
      const char close = rest[2] == '<' ? '>' : '\'';
      const size_t end = rest.find(close, 3);
      if (end == std::string_view::npos) return fail("unterminated group name");
      out_ += "(?<" + std::string(rest.substr(3, end - 3)) + ">";
      pos_ += end + 1;
      return ok_status();
    }
    if (rest.starts_with("(?")) return fail("group '" + std::string(rest.substr(0, 3)) + "'");
    out_ += '(';
    ++pos_;
    return ok_status();
  }

  // Escapes outside a class.
  Status escape() {
    if (pos_ + 1 >= in_.size()) return fail("trailing backslash");
    const char e = in_[pos_ + 1];
    std::string_view rest = in_.substr(pos_);
    if ((e == 'p' || e == 'P' || e == 'x') && rest.size() > 2 && rest[2] == '{') {
      const size_t end = rest.find('}');
      if (end == std::string_view::npos) return fail("unterminated \\" + std::string(1, e) + "{");
      std::string_view body = rest.substr(3, end - 3);
      if (e != 'x' && body == "Word") {
        emit_atom(word_class(e == 'P'));
      } else {
        emit_atom(rest.substr(0, end + 1));
      }
      pos_ += end + 1;
      return ok_status();
    }
    if (e == 'u') {
      if (rest.size() < 6 || !is_hex(rest[2]) || !is_hex(rest[3]) || !is_hex(rest[4]) || !is_hex(rest[5]))
        return fail("escape \\u");
      emit_atom("\\x{" + std::string(rest.substr(2, 4)) + "}");
      pos_ += 6;
      return ok_status();
    }
    pos_ += 2;
    switch (e) {
      case 's': emit_atom("\\p{White_Space}"); return ok_status();
      case 'S': emit_atom("\\P{White_Space}"); return ok_status();
      case 'd': emit_atom("\\p{Nd}"); return ok_status();
      case 'D': emit_atom("\\P{Nd}"); return ok_status();
      case 'w': emit_atom(word_class(false)); return ok_status();
      case 'W': emit_atom(word_class(true)); return ok_status();
      case 'h': emit_atom("[" + std::string(kHexChars) + "]"); return ok_status();
      case 'H': emit_atom("[^" + std::string(kHexChars) + "]"); return ok_status();
      case 'b': emit_atom(word_boundary(false)); return ok_status();
      case 'B': emit_atom(word_boundary(true)); return ok_status();
      case 'Z': emit_atom("(?=\\n?\\z)"); return ok_status();
      case 'a': emit_atom("\\x07"); return ok_status();
      case 'e': emit_atom("\\x1B"); return ok_status();
      case 'v': emit_atom("\\x0B"); return ok_status();
      case 'G': pos_ -= 2; return fail("escape \\G");
      default: break;
    }
    emit_atom(std::string("\\") + e);
    return ok_status();
  }

  // Appends the class items for escape `e` inside [...]; false if it cannot be expressed there.
  bool class_escape(char e, std::string& body) {
    switch (e) {
      case 's': body += "\\p{White_Space}"; return true;
      case 'S': body += "\\P{White_Space}"; return true;
      case 'd': body += "\\p{Nd}"; return true;
      case 'D': body += "\\P{Nd}"; return true;
      case 'w': body += kWordChars; return true;
      case 'h': body += kHexChars; return true;
      case 'a': body += "\\x07"; return true;
      case 'e': body += "\\x1B"; return true;
      case 'v': body += "\\x0B"; return true;
      case 'W':
      case 'H':
      case 'b':
      case 'B':
      case 'G': return false;
      default: body += '\\'; body += e; return true;
    }
  }

  // An escape inside [...] at pos_: appends its class items to `body` and moves past it.
  Status class_escape_item(std::string& body) {
    if (pos_ + 1 >= in_.size()) return fail("trailing backslash");
    const char e = in_[pos_ + 1];
    std::string_view rest = in_.substr(pos_);
    if ((e == 'p' || e == 'P' || e == 'x') && rest.size() > 2 && rest[2] == '{') {
      const size_t end = rest.find('}');
      if (end == std::string_view::npos) return fail("unterminated escape");
      if (rest.substr(3, end - 3) == "Word") {
        if (e == 'P') return fail("\\P{Word} inside a class");
        body += kWordChars;
      } else {
        body += rest.substr(0, end + 1);
      }
      pos_ += end + 1;
      return ok_status();
    }
    if (e == 'u') {
      if (rest.size() < 6) return fail("escape \\u");
      body += "\\x{" + std::string(rest.substr(2, 4)) + "}";
      pos_ += 6;
      return ok_status();
    }
    if (!class_escape(e, body)) return fail(std::string("escape \\") + e + " inside a class");
    pos_ += 2;
    return ok_status();
  }

  // [...] without nesting or intersections; inside (?i:...) ASCII letters and letter ranges also
  // get their other case.
  Status char_class() {
    const size_t start = pos_;
    std::string body;
    std::vector<std::pair<char, char>> ascii_ranges;  // literal ASCII letters/ranges, for folding
    ++pos_;
    const bool negated = pos_ < in_.size() && in_[pos_] == '^';
    if (negated) ++pos_;
    for (bool first = true;; first = false) {
      if (pos_ >= in_.size()) {
        pos_ = start;
        return fail("unterminated character class");
      }
      const char c = in_[pos_];
      if (c == ']' && !first) break;
      if (c == '[') return fail(in_.substr(pos_).starts_with("[:") ? "POSIX bracket class" : "nested character class");
      if (c == '&' && pos_ + 1 < in_.size() && in_[pos_ + 1] == '&') return fail("class intersection '&&'");
      if (c == '\\') {
        BEAM_RETURN_IF_ERROR(class_escape_item(body));
        continue;
      }
      // Literal ASCII letters and letter ranges are recorded for case folding.
      size_t len = static_cast<size_t>(utf8_length(c));
      if (is_ascii_letter(c) && pos_ + 2 < in_.size() && in_[pos_ + 1] == '-' && is_ascii_letter(in_[pos_ + 2])) {
        ascii_ranges.push_back({c, in_[pos_ + 2]});
        len = 3;
      } else if (is_ascii_letter(c)) {
        ascii_ranges.push_back({c, c});
      }
      body += in_.substr(pos_, len);
      pos_ += len;
    }
    ++pos_;  // the closing ]
    if (fold_) {
      // Fold each letter of each range (a range like A-z includes non-letters: letters only).
      for (auto [lo, hi] : ascii_ranges) {
        for (int ch = lo; ch <= hi; ++ch) {
          if (is_ascii_letter(static_cast<char>(ch))) body += other_case(static_cast<char>(ch));
        }
      }
    }
    emit_atom((negated ? "[^" : "[") + body + "]");
    return ok_status();
  }

  std::string_view in_;
  std::string out_;
  size_t pos_ = 0;
  size_t atom_start_ = std::string::npos;
  bool last_was_quantifier_ = false;
  bool fold_ = false;
  std::vector<Group> groups_;
};

}  // namespace

Expected<std::string> translate_oniguruma_pattern(std::string_view pattern) {
  return Translator(pattern).run();
}

}  // namespace beam::text
