// Tokenizer mirroring @huggingface/jinja's lexer, with offsets into the original source.
#include "text/jinja/lexer.h"

#include <cctype>

#include "text/jinja/error.h"
#include "text/jinja/js_string.h"
#include "text/utf8.h"

namespace beam::text::jinja {
namespace {

// Text plus, for each byte, its offset in the original template (one extra entry for the end).
struct MappedText {
  std::string text;
  std::vector<uint32_t> origin;

  void push(char c, uint32_t at) {
    text.push_back(c);
    origin.push_back(at);
  }
  uint32_t end_origin = 0;
  uint32_t origin_at(size_t pos) const { return pos < origin.size() ? origin[pos] : end_origin; }
};

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_';
}

// True at a line start: the beginning, or just after a JS line terminator (\n \r U+2028 U+2029).
bool after_line_terminator(std::string_view s, size_t pos) {
  if (pos == 0) return true;
  if (s[pos - 1] == '\n' || s[pos - 1] == '\r') return true;
  return pos >= 3 && (s.substr(pos - 3, 3) == "\xE2\x80\xA8" || s.substr(pos - 3, 3) == "\xE2\x80\xA9");
}

// lstrip_blocks: /^[ \t]*({[#%-])/gm → "$1".
MappedText lstrip_blocks(const MappedText& in) {
  MappedText out;
  out.end_origin = in.end_origin;
  const std::string& s = in.text;
  for (size_t i = 0; i < s.size();) {
    if (after_line_terminator(s, i)) {
      size_t j = i;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      if (j + 1 < s.size() && s[j] == '{' && (s[j + 1] == '#' || s[j + 1] == '%' || s[j + 1] == '-')) i = j;
    }
    out.push(s[i], in.origin[i]);
    ++i;
  }
  return out;
}

// trim_blocks: /([#%-]})\n/g → "$1".
MappedText trim_blocks(const MappedText& in) {
  MappedText out;
  out.end_origin = in.end_origin;
  const std::string& s = in.text;
  for (size_t i = 0; i < s.size(); ++i) {
    bool drop = s[i] == '\n' && i >= 2 && s[i - 1] == '}' && (s[i - 2] == '#' || s[i - 2] == '%' || s[i - 2] == '-');
    if (!drop) out.push(s[i], in.origin[i]);
  }
  return out;
}

size_t skip_js_spaces(std::string_view s, size_t pos) {
  while (size_t n = js_space_length_at(s, pos)) pos += n;
  return pos;
}

// Removes trailing JS whitespace from `out`, never below byte `floor`.
void pop_trailing_spaces(MappedText& out, size_t floor) {
  while (out.text.size() > floor) {
    size_t start = out.text.size() - 1;
    while (start > floor && (static_cast<unsigned char>(out.text[start]) & 0xC0) == 0x80) --start;
    if (js_space_length_at(out.text, start) != out.text.size() - start) return;
    out.text.resize(start);
    out.origin.resize(start);
  }
}

// Matches `{%-? \s* (end)?generation \s* -?%}` at `pos`; returns the end or 0.
size_t match_generation_tag(std::string_view s, size_t pos, bool& lstrip, bool& rstrip) {
  if (s.substr(pos, 2) != "{%") return 0;
  size_t j = pos + 2;
  lstrip = j < s.size() && s[j] == '-';
  if (lstrip) ++j;
  j = skip_js_spaces(s, j);
  if (s.substr(j, 3) == "end") j += 3;
  if (s.substr(j, 10) != "generation") return 0;
  j = skip_js_spaces(s, j + 10);
  rstrip = j < s.size() && s[j] == '-';
  if (rstrip) ++j;
  if (s.substr(j, 2) != "%}") return 0;
  return j + 2;
}

// The transformers-specific {% generation %} / {% endgeneration %} tags are removed, honouring
// their whitespace-control dashes.
MappedText remove_generation_tags(const MappedText& in) {
  MappedText out;
  out.end_origin = in.end_origin;
  const std::string& s = in.text;
  size_t floor = 0;  // output produced by the previous match cannot be stripped again
  for (size_t i = 0; i < s.size();) {
    bool lstrip = false, rstrip = false;
    if (size_t end = match_generation_tag(s, i, lstrip, rstrip)) {
      if (lstrip) pop_trailing_spaces(out, floor);
      size_t after = skip_js_spaces(s, end);
      if (!rstrip) {
        for (size_t k = end; k < after; ++k) out.push(s[k], in.origin[k]);
      }
      i = after;
      floor = out.text.size();
      continue;
    }
    out.push(s[i], in.origin[i]);
    ++i;
  }
  return out;
}

MappedText preprocess(std::string_view source) {
  MappedText mapped;
  size_t n = source.size();
  if (n > 0 && source.back() == '\n') --n;
  mapped.end_origin = static_cast<uint32_t>(n);
  mapped.text.assign(source.substr(0, n));
  mapped.origin.resize(n);
  for (size_t i = 0; i < n; ++i) mapped.origin[i] = static_cast<uint32_t>(i);
  return remove_generation_tags(trim_blocks(lstrip_blocks(mapped)));
}

struct OperatorSpelling {
  std::string_view text;
  TokenType type;
};

// Order matters: longer spellings before their prefixes.
constexpr OperatorSpelling kOperators[] = {
    {"{%", TokenType::kOpenStatement},      {"%}", TokenType::kCloseStatement},
    {"{{", TokenType::kOpenExpression},     {"}}", TokenType::kCloseExpression},
    {"(", TokenType::kOpenParen},           {")", TokenType::kCloseParen},
    {"{", TokenType::kOpenCurlyBracket},    {"}", TokenType::kCloseCurlyBracket},
    {"[", TokenType::kOpenSquareBracket},   {"]", TokenType::kCloseSquareBracket},
    {",", TokenType::kComma},               {".", TokenType::kDot},
    {":", TokenType::kColon},               {"|", TokenType::kPipe},
    {"<=", TokenType::kComparisonOperator}, {">=", TokenType::kComparisonOperator},
    {"==", TokenType::kComparisonOperator}, {"!=", TokenType::kComparisonOperator},
    {"<", TokenType::kComparisonOperator},  {">", TokenType::kComparisonOperator},
    {"+", TokenType::kAdditiveOperator},    {"-", TokenType::kAdditiveOperator},
    {"~", TokenType::kAdditiveOperator},    {"**", TokenType::kExponentiationOperator},
    {"*", TokenType::kMultiplicativeOperator}, {"//", TokenType::kMultiplicativeOperator},
    {"/", TokenType::kMultiplicativeOperator}, {"%", TokenType::kMultiplicativeOperator},
    {"=", TokenType::kEquals},
};

class Lexer {
 public:
  explicit Lexer(MappedText src) : src_(std::move(src)), s_(src_.text) {}

  std::vector<Token> run();

 private:
  bool last_is(TokenType t) const { return !tokens_.empty() && tokens_.back().type == t; }
  bool at(std::string_view text) const { return s_.substr(pos_, text.size()) == text; }
  char ch(size_t i) const { return i < s_.size() ? s_[i] : '\0'; }
  uint32_t origin(size_t i) const { return src_.origin_at(i); }
  void push(TokenType type, std::string value, size_t start) {
    tokens_.push_back(Token{type, std::move(value), origin(start)});
  }
  [[noreturn]] void error(const std::string& message, size_t at) const { fail_syntax(message, origin(at)); }

  bool consume_text();
  void consume_comment();
  void strip_trailing_whitespace();
  bool consume_signed_number();
  bool consume_operator();
  std::string consume_digits();
  void consume_string(char quote);
  void consume_escape(std::string& out, char32_t& pending_high);

  MappedText src_;
  std::string_view s_;
  size_t pos_ = 0;
  int curly_depth_ = 0;
  std::vector<Token> tokens_;
};

std::vector<Token> Lexer::run() {
  while (pos_ < s_.size()) {
    bool outside = tokens_.empty() || last_is(TokenType::kCloseStatement) ||
                   last_is(TokenType::kCloseExpression) || last_is(TokenType::kComment);
    if (outside && consume_text()) continue;
    if (at("{#")) {
      consume_comment();
      continue;
    }
    if (at("{%-") || at("{{-")) {
      strip_trailing_whitespace();
      bool statement = at("{%-");
      push(statement ? TokenType::kOpenStatement : TokenType::kOpenExpression, statement ? "{%" : "{{", pos_);
      if (!statement) curly_depth_ = 0;
      pos_ += 3;
      continue;
    }
    // Whitespace inside a tag separates tokens; the template may not end inside a tag.
    while (size_t n = js_space_length_at(s_, pos_)) {
      pos_ += n;
      if (pos_ >= s_.size()) error("unexpected end of template inside a tag", pos_);
    }
    if (at("-%}") || at("-}}")) {
      bool statement = at("-%}");
      push(statement ? TokenType::kCloseStatement : TokenType::kCloseExpression, statement ? "%}" : "}}", pos_);
      pos_ = skip_js_spaces(s_, pos_ + 3);
      continue;
    }
    char c = s_[pos_];
    if ((c == '-' || c == '+') && consume_signed_number()) continue;
    if (consume_operator()) continue;
    size_t start = pos_;
    if (c == '\'' || c == '"') {
      consume_string(c);
    } else if (is_digit(c)) {
      std::string num = consume_digits();
      if (!last_is(TokenType::kDot) && ch(pos_) == '.' && is_digit(ch(pos_ + 1))) {
        ++pos_;
        num += "." + consume_digits();
      }
      push(TokenType::kNumericLiteral, std::move(num), start);
    } else if (is_word(c)) {
      while (pos_ < s_.size() && is_word(s_[pos_])) ++pos_;
      if (pos_ >= s_.size()) error("unexpected end of template inside a tag", pos_);
      push(TokenType::kIdentifier, std::string(s_.substr(start, pos_ - start)), start);
    } else {
      size_t next = pos_;
      std::string bad;
      append_utf8(bad, decode_utf8(s_, next));
      error("unexpected character '" + bad + "'", pos_);
    }
  }
  return std::move(tokens_);
}

// Text up to the next "{%", "{{" or "{#"; false when there is none at the cursor.
bool Lexer::consume_text() {
  size_t start = pos_;
  while (pos_ < s_.size() && !(s_[pos_] == '{' && (ch(pos_ + 1) == '%' || ch(pos_ + 1) == '{' || ch(pos_ + 1) == '#'))) {
    ++pos_;
  }
  if (pos_ == start) return false;
  push(TokenType::kText, std::string(s_.substr(start, pos_ - start)), start);
  return true;
}

void Lexer::consume_comment() {
  size_t start = pos_;
  pos_ += 2;
  bool strip_before = ch(pos_) == '-';
  if (strip_before) ++pos_;
  size_t body = pos_;
  while (!(ch(pos_) == '#' && ch(pos_ + 1) == '}')) {
    if (pos_ + 2 >= s_.size()) error("missing end of comment tag '#}'", start);
    ++pos_;
  }
  std::string comment(s_.substr(body, pos_ - body));
  bool strip_after = !comment.empty() && comment.back() == '-';
  if (strip_after) comment.pop_back();
  if (strip_before) strip_trailing_whitespace();
  push(TokenType::kComment, std::move(comment), start);
  pos_ += 2;
  if (strip_after) pos_ = skip_js_spaces(s_, pos_);
}

void Lexer::strip_trailing_whitespace() {
  if (!last_is(TokenType::kText)) return;
  std::string& text = tokens_.back().value;
  text.resize(js_trim_end(text).size());
  if (text.empty()) tokens_.pop_back();
}

// A sign after an operand is a binary operator (false: the operator table handles it); otherwise
// it is a unary sign, merged into a following number literal.
bool Lexer::consume_signed_number() {
  if (tokens_.empty() || last_is(TokenType::kText)) error("unexpected character '" + std::string(1, s_[pos_]) + "'", pos_);
  switch (tokens_.back().type) {
    case TokenType::kIdentifier: case TokenType::kNumericLiteral: case TokenType::kStringLiteral:
    case TokenType::kCloseParen: case TokenType::kCloseSquareBracket:
      return false;
    default:
      break;
  }
  size_t start = pos_;
  char sign = s_[pos_++];
  std::string num = consume_digits();
  if (!num.empty() && ch(pos_) == '.' && is_digit(ch(pos_ + 1))) {
    ++pos_;
    num += "." + consume_digits();
  }
  bool is_number = !num.empty();
  push(is_number ? TokenType::kNumericLiteral : TokenType::kUnaryOperator, std::string(1, sign) + num, start);
  return true;
}

bool Lexer::consume_operator() {
  for (const auto& op : kOperators) {
    if (op.text == "}}" && curly_depth_ > 0) continue;
    if (!at(op.text)) continue;
    push(op.type, std::string(op.text), pos_);
    if (op.type == TokenType::kOpenExpression) curly_depth_ = 0;
    if (op.type == TokenType::kOpenCurlyBracket) ++curly_depth_;
    if (op.type == TokenType::kCloseCurlyBracket) --curly_depth_;
    pos_ += op.text.size();
    return true;
  }
  return false;
}

std::string Lexer::consume_digits() {
  size_t start = pos_;
  while (pos_ < s_.size() && is_digit(s_[pos_])) ++pos_;
  if (pos_ > start && pos_ >= s_.size()) error("unexpected end of template inside a tag", pos_);
  return std::string(s_.substr(start, pos_ - start));
}

void Lexer::consume_string(char quote) {
  size_t start = pos_;
  ++pos_;
  std::string value;
  char32_t pending_high = 0;  // a \uD800-\uDBFF escape waiting for its low half
  while (pos_ < s_.size() && s_[pos_] != quote) {
    if (s_[pos_] == '\\') {
      consume_escape(value, pending_high);
      continue;
    }
    if (pending_high) {
      append_utf8(value, 0xFFFD);
      pending_high = 0;
    }
    value.push_back(s_[pos_++]);
  }
  if (pos_ >= s_.size()) error("unterminated string literal", start);
  if (pending_high) append_utf8(value, 0xFFFD);
  ++pos_;
  push(TokenType::kStringLiteral, std::move(value), start);
}

void Lexer::consume_escape(std::string& out, char32_t& pending_high) {
  size_t start = pos_;
  ++pos_;
  if (pos_ >= s_.size()) error("unexpected end of template in an escape sequence", start);
  char e = s_[pos_++];
  if (e == 'x' || e == 'u') {
    size_t len = e == 'x' ? 2 : 4;
    std::string hex(s_.substr(pos_, len));
    bool valid = hex.size() == len;
    for (char h : hex) valid = valid && std::isxdigit(static_cast<unsigned char>(h));
    if (!valid) error("invalid hexadecimal escape sequence '\\" + std::string(1, e) + hex + "'", start);
    pos_ += len;
    char32_t unit = static_cast<char32_t>(std::stoul(hex, nullptr, 16));
    if (pending_high && unit >= 0xDC00 && unit <= 0xDFFF) {
      append_utf8(out, 0x10000 + ((pending_high - 0xD800) << 10) + (unit - 0xDC00));
      pending_high = 0;
      return;
    }
    if (pending_high) append_utf8(out, 0xFFFD);
    pending_high = 0;
    if (unit >= 0xD800 && unit <= 0xDBFF) {
      pending_high = unit;
    } else {
      append_utf8(out, unit);  // a lone low surrogate prints as U+FFFD
    }
    return;
  }
  if (pending_high) append_utf8(out, 0xFFFD);
  pending_high = 0;
  switch (e) {
    case 'n': out.push_back('\n'); return;
    case 't': out.push_back('\t'); return;
    case 'r': out.push_back('\r'); return;
    case 'b': out.push_back('\b'); return;
    case 'f': out.push_back('\f'); return;
    case 'v': out.push_back('\v'); return;
    case '\'': case '"': case '\\': out.push_back(e); return;
    default: error("unexpected escaped character '" + std::string(1, e) + "'", start);
  }
}

}  // namespace

const char* token_type_name(TokenType type) {
  switch (type) {
    case TokenType::kText: return "text";
    case TokenType::kNumericLiteral: return "number";
    case TokenType::kStringLiteral: return "string";
    case TokenType::kIdentifier: return "identifier";
    case TokenType::kEquals: return "'='";
    case TokenType::kOpenParen: return "'('";
    case TokenType::kCloseParen: return "')'";
    case TokenType::kOpenStatement: return "'{%'";
    case TokenType::kCloseStatement: return "'%}'";
    case TokenType::kOpenExpression: return "'{{'";
    case TokenType::kCloseExpression: return "'}}'";
    case TokenType::kOpenSquareBracket: return "'['";
    case TokenType::kCloseSquareBracket: return "']'";
    case TokenType::kOpenCurlyBracket: return "'{'";
    case TokenType::kCloseCurlyBracket: return "'}'";
    case TokenType::kComma: return "','";
    case TokenType::kDot: return "'.'";
    case TokenType::kColon: return "':'";
    case TokenType::kPipe: return "'|'";
    case TokenType::kAdditiveOperator: return "additive operator";
    case TokenType::kMultiplicativeOperator: return "multiplicative operator";
    case TokenType::kExponentiationOperator: return "'**'";
    case TokenType::kComparisonOperator: return "comparison operator";
    case TokenType::kUnaryOperator: return "unary operator";
    case TokenType::kComment: return "comment";
  }
  return "?";
}

std::vector<Token> tokenize(std::string_view source) {
  if (source.size() >= kNoOffset) fail_syntax("template larger than 4 GiB", 0);
  return Lexer(preprocess(source)).run();
}

}  // namespace beam::text::jinja
