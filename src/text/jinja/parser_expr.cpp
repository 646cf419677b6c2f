// Expression parsing, lowest precedence first: ternary / select, or, and, not, comparisons and
// membership, + - ~, * / // %, **, `is` tests, filters, unary signs, calls and member access.
#include <cstdlib>
#include <set>

#include "text/jinja/error.h"
#include "text/jinja/parser_internal.h"

namespace beam::text::jinja {
namespace {

BinaryOp comparison_op(const std::string& op) {
  if (op == "==") return BinaryOp::kEq;
  if (op == "!=") return BinaryOp::kNe;
  if (op == "<") return BinaryOp::kLt;
  if (op == ">") return BinaryOp::kGt;
  if (op == "<=") return BinaryOp::kLe;
  return BinaryOp::kGe;
}

BinaryOp additive_op(const std::string& op) {
  if (op == "+") return BinaryOp::kAdd;
  if (op == "-") return BinaryOp::kSub;
  return BinaryOp::kConcat;
}

BinaryOp multiplicative_op(const std::string& op) {
  if (op == "*") return BinaryOp::kMul;
  if (op == "/") return BinaryOp::kDiv;
  if (op == "//") return BinaryOp::kFloorDiv;
  return BinaryOp::kMod;
}

ExprPtr make_binary(BinaryOp op, ExprPtr left, ExprPtr right) {
  uint32_t at = left->offset;
  return make_expr(at, BinaryExpr{op, std::move(left), std::move(right)});
}

}  // namespace

ExprPtr Parser::parse_expression() {
  NestingGuard guard(*this);
  return parse_if_expression();
}

// A single expression or a comma-separated tuple (`set a, b = ...`, `for k, v in ...`).
ExprPtr Parser::parse_sequence(bool primary_only) {
  uint32_t at = offset();
  ExprPtr first = primary_only ? parse_primary() : parse_expression();
  if (!is(TokenType::kComma)) return first;
  ListExpr tuple;
  tuple.is_tuple = true;
  tuple.items.push_back(std::move(first));
  while (is(TokenType::kComma)) {
    ++pos_;
    tuple.items.push_back(primary_only ? parse_primary() : parse_expression());
  }
  return make_expr(at, std::move(tuple));
}

ExprPtr Parser::parse_if_expression() {
  ExprPtr value = parse_or();
  if (!is_identifier("if")) return value;
  ++pos_;
  uint32_t at = value->offset;
  ExprPtr condition = parse_or();
  if (is_identifier("else")) {
    ++pos_;
    ExprPtr otherwise = parse_if_expression();
    return make_expr(at, TernaryExpr{std::move(condition), std::move(value), std::move(otherwise)});
  }
  return make_expr(at, SelectExpr{std::move(value), std::move(condition)});
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  ChainGuard chain(*this);
  while (is_identifier("or")) {
    chain.link();
    ++pos_;
    left = make_binary(BinaryOp::kOr, std::move(left), parse_and());
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  ChainGuard chain(*this);
  while (is_identifier("and")) {
    chain.link();
    ++pos_;
    left = make_binary(BinaryOp::kAnd, std::move(left), parse_not());
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (!is_identifier("not")) return parse_comparison();
  NestingGuard guard(*this);
  uint32_t at = offset();
  ++pos_;
  return make_expr(at, UnaryExpr{UnaryOp::kNot, parse_not()});
}

ExprPtr Parser::parse_comparison() {
  ExprPtr left = parse_additive();
  ChainGuard chain(*this);
  while (true) {
    BinaryOp op;
    if (is_identifier("not") && is_identifier("in", 1)) {
      op = BinaryOp::kNotIn;
      pos_ += 2;
    } else if (is_identifier("in")) {
      op = BinaryOp::kIn;
      ++pos_;
    } else if (is(TokenType::kComparisonOperator)) {
      op = comparison_op(tokens_[pos_++].value);
    } else {
      break;
    }
    chain.link();
    left = make_binary(op, std::move(left), parse_additive());
  }
  return left;
}

ExprPtr Parser::parse_additive() {
  ExprPtr left = parse_multiplicative();
  ChainGuard chain(*this);
  while (is(TokenType::kAdditiveOperator)) {
    chain.link();
    BinaryOp op = additive_op(tokens_[pos_++].value);
    left = make_binary(op, std::move(left), parse_multiplicative());
  }
  return left;
}

ExprPtr Parser::parse_multiplicative() {
  ExprPtr left = parse_power();
  ChainGuard chain(*this);
  while (is(TokenType::kMultiplicativeOperator)) {
    chain.link();
    BinaryOp op = multiplicative_op(tokens_[pos_++].value);
    left = make_binary(op, std::move(left), parse_power());
  }
  return left;
}

// Left-associative, like Jinja: 2 ** 3 ** 2 == (2 ** 3) ** 2.
ExprPtr Parser::parse_power() {
  ExprPtr left = parse_test();
  ChainGuard chain(*this);
  while (is(TokenType::kExponentiationOperator)) {
    chain.link();
    ++pos_;
    left = make_binary(BinaryOp::kPow, std::move(left), parse_test());
  }
  return left;
}

ExprPtr Parser::parse_test() {
  static const std::set<std::string, std::less<>> kNotAnArgument = {"else", "or", "and", "if", "is", "in", "not"};
  ExprPtr operand = parse_filter();
  ChainGuard chain(*this);
  while (is_identifier("is")) {
    chain.link();
    ++pos_;
    TestExpr test;
    test.negated = is_identifier("not");
    if (test.negated) ++pos_;
    if (!is(TokenType::kIdentifier)) error("expected a test name after 'is'");
    test.name = tokens_[pos_++].value;
    // Python Jinja's test arguments: `is divisibleby(3)` or `is eq 3` (one primary expression).
    if (is(TokenType::kOpenParen)) {
      test.args = parse_args(ArgMode::kCall);
    } else if (is(TokenType::kStringLiteral) || is(TokenType::kNumericLiteral) || is(TokenType::kOpenSquareBracket) ||
               is(TokenType::kOpenCurlyBracket) ||
               (is(TokenType::kIdentifier) && !kNotAnArgument.count(tokens_[pos_].value))) {
      Argument arg;
      arg.value = parse_member_chain(parse_primary());
      test.args.push_back(std::move(arg));
    }
    uint32_t at = operand->offset;
    test.operand = std::move(operand);
    operand = make_expr(at, std::move(test));
  }
  return operand;
}

ExprPtr Parser::parse_filter() {
  ExprPtr operand = parse_unary_sign();
  ChainGuard chain(*this);
  while (is(TokenType::kPipe)) {
    chain.link();
    ++pos_;
    if (!is(TokenType::kIdentifier)) error("expected a filter name after '|'");
    FilterExpr filter;
    filter.name = tokens_[pos_++].value;
    if (is(TokenType::kOpenParen)) {
      filter.args = parse_args(ArgMode::kCall);
      filter.has_call = true;
    }
    uint32_t at = operand->offset;
    filter.operand = std::move(operand);
    operand = make_expr(at, std::move(filter));
  }
  return operand;
}

ExprPtr Parser::parse_unary_sign() {
  const Token* t = peek();
  bool sign = t && (t->type == TokenType::kUnaryOperator || t->type == TokenType::kAdditiveOperator) &&
              (t->value == "-" || t->value == "+");
  if (!sign) return parse_call_member();
  NestingGuard guard(*this);
  uint32_t at = t->offset;
  UnaryOp op = t->value == "-" ? UnaryOp::kMinus : UnaryOp::kPlus;
  ++pos_;
  return make_expr(at, UnaryExpr{op, parse_unary_sign()});
}

ExprPtr Parser::parse_call_member() {
  ExprPtr member = parse_member_chain(parse_primary());
  if (is(TokenType::kOpenParen)) return parse_call(std::move(member));
  return member;
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  NestingGuard guard(*this);
  uint32_t at = callee->offset;
  std::vector<Argument> args = parse_args(ArgMode::kCall);
  ExprPtr call = parse_member_chain(make_expr(at, CallExpr{std::move(callee), std::move(args)}));
  if (is(TokenType::kOpenParen)) return parse_call(std::move(call));
  return call;
}

ExprPtr Parser::parse_member_chain(ExprPtr object) {
  ChainGuard chain(*this);
  while (is(TokenType::kDot) || is(TokenType::kOpenSquareBracket)) {
    chain.link();
    uint32_t at = offset();
    bool computed = is(TokenType::kOpenSquareBracket);
    ++pos_;
    ExprPtr property;
    if (computed) {
      property = parse_subscript(at);
      expect(TokenType::kCloseSquareBracket, "']'");
    } else {
      property = parse_primary();
      bool is_int = false;
      if (auto* lit = std::get_if<LiteralExpr>(&property->node)) is_int = lit->value.is(ValueKind::kInt);
      if (!is_int && !std::holds_alternative<NameExpr>(property->node)) {
        error_at("expected a name or an integer after '.'", property->offset);
      }
    }
    uint32_t object_at = object->offset;
    object = make_expr(object_at, MemberExpr{std::move(object), std::move(property), computed});
  }
  return object;
}

// The inside of `[...]`: an index expression or a slice start:stop:step (each part optional).
ExprPtr Parser::parse_subscript(uint32_t at) {
  std::vector<ExprPtr> parts;
  bool is_slice = false;
  while (!is(TokenType::kCloseSquareBracket)) {
    if (pos_ >= tokens_.size()) error("unexpected end of template, expected ']'");
    if (is(TokenType::kColon)) {
      parts.push_back(nullptr);
      ++pos_;
      is_slice = true;
      continue;
    }
    parts.push_back(parse_expression());
    if (is(TokenType::kColon)) {
      ++pos_;
      is_slice = true;
    } else if (!is(TokenType::kCloseSquareBracket)) {
      error("expected ':' or ']' in a subscript");
    }
  }
  if (parts.empty()) error_at("expected an index or a slice inside '[]'", at);
  if (!is_slice) return std::move(parts[0]);
  if (parts.size() > 3) error_at("a slice takes at most three parts (start:stop:step)", at);
  parts.resize(3);
  return make_expr(at, SliceExpr{std::move(parts[0]), std::move(parts[1]), std::move(parts[2])});
}

ExprPtr Parser::parse_primary() {
  NestingGuard guard(*this);
  const Token& t = next("an expression");
  switch (t.type) {
    case TokenType::kNumericLiteral: {
      double v = std::strtod(t.value.c_str(), nullptr);
      bool is_float = t.value.find('.') != std::string::npos;
      return make_expr(t.offset, LiteralExpr{is_float ? Value::floating(v) : Value::integer(v)});
    }
    case TokenType::kStringLiteral: {
      std::string value = t.value;
      while (is(TokenType::kStringLiteral)) value += tokens_[pos_++].value;  // 'a' 'b' == 'ab'
      return make_expr(t.offset, LiteralExpr{Value::string(std::move(value))});
    }
    case TokenType::kIdentifier:
      if (t.value == "varargs") ++varargs_reads_;
      if (t.value == "kwargs") ++kwargs_reads_;
      return make_expr(t.offset, NameExpr{t.value});
    case TokenType::kOpenParen: {
      ExprPtr inner = parse_sequence(false);
      expect(TokenType::kCloseParen, "')'");
      return inner;
    }
    case TokenType::kOpenSquareBracket: return parse_list_literal(t.offset);
    case TokenType::kOpenCurlyBracket: return parse_dict_literal(t.offset);
    default:
      error_at(std::string("unexpected ") + token_type_name(t.type) + " in an expression", t.offset);
  }
}

// After '['; commas between items are optional, as in the reference.
ExprPtr Parser::parse_list_literal(uint32_t at) {
  ListExpr list;
  while (!is(TokenType::kCloseSquareBracket)) {
    if (pos_ >= tokens_.size()) error("unexpected end of template, expected ']'");
    list.items.push_back(parse_expression());
    if (is(TokenType::kComma)) ++pos_;
  }
  ++pos_;
  return make_expr(at, std::move(list));
}

ExprPtr Parser::parse_dict_literal(uint32_t at) {
  DictExpr dict;
  while (!is(TokenType::kCloseCurlyBracket)) {
    if (pos_ >= tokens_.size()) error("unexpected end of template, expected '}'");
    ExprPtr key = parse_expression();
    expect(TokenType::kColon, "':' between a key and its value");
    ExprPtr value = parse_expression();
    dict.entries.emplace_back(std::move(key), std::move(value));
    if (is(TokenType::kComma)) ++pos_;
  }
  ++pos_;
  return make_expr(at, std::move(dict));
}

std::vector<Argument> Parser::parse_args(ArgMode mode) {
  expect(TokenType::kOpenParen, "'('");
  std::vector<Argument> args;
  std::set<std::string, std::less<>> names;
  bool saw_keyword = false, saw_spread = false;
  bool params = mode == ArgMode::kParameters;
  while (!is(TokenType::kCloseParen)) {
    if (pos_ >= tokens_.size()) error("unexpected end of template, expected ')'");
    bool keyword_spread = is(TokenType::kExponentiationOperator);
    bool spread = is(TokenType::kMultiplicativeOperator) && tokens_[pos_].value == "*";
    if (params && (keyword_spread || spread)) error("argument unpacking is not allowed in parameter declarations");
    Argument arg;
    if (keyword_spread) {
      ++pos_;
      arg.kind = ArgKind::kKeywordSpread;
      arg.value = parse_expression();
      args.push_back(std::move(arg));
      if (is(TokenType::kComma)) ++pos_;
      if (!is(TokenType::kCloseParen)) error("'**' must be applied to the last argument");
      break;
    }
    if (spread) {
      if (saw_spread) error("only one '*' argument unpacking is allowed");
      saw_spread = true;
      ++pos_;
      arg.kind = ArgKind::kSpread;
      arg.value = parse_expression();
    } else {
      uint32_t at = offset();
      arg.value = parse_expression();
      auto* name = std::get_if<NameExpr>(&arg.value->node);
      if (is(TokenType::kEquals)) {
        ++pos_;
        if (!name) error_at(params ? "expected a parameter name" : "expected a keyword argument name", at);
        arg.kind = ArgKind::kKeyword;
        arg.name = name->name;
        arg.value = parse_expression();
      } else if (params && !name) {
        error_at("expected a parameter name", at);
      }
      if (params) {
        std::string pname = arg.kind == ArgKind::kKeyword ? arg.name : std::get<NameExpr>(arg.value->node).name;
        if (!names.insert(pname).second) error_at("duplicate parameter name '" + pname + "'", at);
      }
      if (arg.kind == ArgKind::kKeyword) {
        saw_keyword = true;
      } else if (saw_keyword) {
        error_at(params ? "non-default parameter follows a default parameter"
                        : "positional argument follows keyword argument",
                 at);
      } else if (saw_spread) {
        error_at("positional argument follows '*' unpacking", at);
      }
    }
    args.push_back(std::move(arg));
    if (is(TokenType::kComma)) ++pos_;
  }
  expect(TokenType::kCloseParen, "')'");
  return args;
}

}  // namespace beam::text::jinja
