// Statement parsing: text, {{ }}, and the {% %} statements set, if/elif/else, for/else, macro,
// call, filter, break, continue. Block ends are checked so errors name the unclosed opener.
#include "text/jinja/parser.h"

#include "text/jinja/error.h"
#include "text/jinja/parser_internal.h"

namespace beam::text::jinja {

Parser::NestingGuard::NestingGuard(Parser& p) : parser_(p) {
  if (++parser_.depth_ > kMaxNesting) {
    parser_.error("template nested more than " + std::to_string(kMaxNesting) + " levels deep");
  }
}

void Parser::ChainGuard::link() {
  ++links_;
  if (++parser_.depth_ > kMaxNesting) {
    parser_.error("template nested more than " + std::to_string(kMaxNesting) + " levels deep");
  }
}

bool Parser::is_statement(std::initializer_list<std::string_view> names) const {
  if (!is(TokenType::kOpenStatement) || !is(TokenType::kIdentifier, 1)) return false;
  for (std::string_view name : names) {
    if (peek(1)->value == name) return true;
  }
  return false;
}

const Token& Parser::next(const char* expected) {
  if (pos_ >= tokens_.size()) error(std::string("unexpected end of template, expected ") + expected);
  return tokens_[pos_++];
}

const Token& Parser::expect(TokenType type, const char* what) {
  if (!is(type)) {
    if (pos_ >= tokens_.size()) error(std::string("unexpected end of template, expected ") + what);
    error(std::string("expected ") + what + ", got " + token_type_name(tokens_[pos_].type) +
          (tokens_[pos_].type == TokenType::kIdentifier ? " '" + tokens_[pos_].value + "'" : ""));
  }
  return tokens_[pos_++];
}

void Parser::expect_identifier(std::string_view name) {
  if (!is_identifier(name)) error("expected '" + std::string(name) + "'");
  ++pos_;
}

void Parser::error(const std::string& message) const { error_at(message, offset()); }

void Parser::error_at(const std::string& message, uint32_t at) const { fail_syntax(message, at); }

Block Parser::parse_program() {
  Block program;
  while (pos_ < tokens_.size()) {
    if (StmtPtr s = parse_any()) program.push_back(std::move(s));
  }
  return program;
}

// One piece of template: text, a {{ }} expression, a statement; comments yield nullptr.
StmtPtr Parser::parse_any() {
  NestingGuard guard(*this);
  const Token& t = tokens_[pos_];
  switch (t.type) {
    case TokenType::kComment:
      ++pos_;
      return nullptr;
    case TokenType::kText:
      ++pos_;
      return make_stmt(t.offset, TextStmt{t.value});
    case TokenType::kOpenStatement:
      return parse_statement();
    case TokenType::kOpenExpression: {
      ++pos_;
      ExprPtr e = parse_expression();
      expect(TokenType::kCloseExpression, "'}}'");
      return make_stmt(t.offset, OutputStmt{std::move(e)});
    }
    default:
      error(std::string("unexpected ") + token_type_name(t.type));
  }
}

StmtPtr Parser::parse_statement() {
  uint32_t at = offset();
  expect(TokenType::kOpenStatement, "'{%'");
  if (!is(TokenType::kIdentifier)) error("expected a statement name after '{%'");
  std::string name = tokens_[pos_].value;
  ++pos_;
  if (name == "set") return parse_set(at);
  if (name == "if") return parse_if(at);
  if (name == "for") return parse_for(at);
  if (name == "macro") return parse_macro(at);
  if (name == "call") return parse_call_block(at);
  if (name == "filter") return parse_filter_block(at);
  if (name == "break" || name == "continue") {
    expect(TokenType::kCloseStatement, "'%}'");
    if (name == "break") return make_stmt(at, BreakStmt{});
    return make_stmt(at, ContinueStmt{});
  }
  bool stray_end = name.rfind("end", 0) == 0 || name == "elif" || name == "else";
  error_at(stray_end ? "unexpected '{% " + name + " %}' with no open block it could close"
                     : "unknown or unsupported statement '" + name + "'",
           at);
}

Block Parser::parse_block_until(std::initializer_list<std::string_view> ends, const char* opener, uint32_t opened_at) {
  Block body;
  while (!is_statement(ends)) {
    if (pos_ >= tokens_.size()) {
      error_at(std::string("unexpected end of template: '{% ") + opener + " %}' is never closed", opened_at);
    }
    if (StmtPtr s = parse_any()) body.push_back(std::move(s));
  }
  return body;
}

// Consumes `{% name %}`.
void Parser::expect_end_tag(std::string_view name) {
  expect(TokenType::kOpenStatement, "'{%'");
  expect_identifier(name);
  expect(TokenType::kCloseStatement, "'%}'");
}

StmtPtr Parser::parse_set(uint32_t at) {
  SetStmt set;
  set.target = parse_sequence(false);
  bool assignable = std::holds_alternative<NameExpr>(set.target->node) ||
                    std::holds_alternative<MemberExpr>(set.target->node) ||
                    std::holds_alternative<ListExpr>(set.target->node);
  if (!assignable) error_at("cannot assign to this expression in 'set'", set.target->offset);
  if (is(TokenType::kEquals)) {
    ++pos_;
    set.value = parse_sequence(false);
    expect(TokenType::kCloseStatement, "'%}'");
  } else {
    expect(TokenType::kCloseStatement, "'=' or '%}'");
    set.body = parse_block_until({"endset"}, "set", at);
    expect_end_tag("endset");
  }
  return make_stmt(at, std::move(set));
}

// After `{% if` (or `{% elif`); consumes the closing endif only for the outermost `if`.
StmtPtr Parser::parse_if(uint32_t at) {
  NestingGuard guard(*this);  // elif chains nest
  IfStmt node;
  node.test = parse_expression();
  expect(TokenType::kCloseStatement, "'%}'");
  node.body = parse_block_until({"elif", "else", "endif"}, "if", at);
  bool nested_elif = false;
  if (is_statement({"elif"})) {
    uint32_t elif_at = offset();
    pos_ += 2;
    node.orelse.push_back(parse_if(elif_at));
    nested_elif = true;
  } else if (is_statement({"else"})) {
    pos_ += 2;
    expect(TokenType::kCloseStatement, "'%}'");
    node.orelse = parse_block_until({"endif"}, "if", at);
  }
  if (!nested_elif) expect_end_tag("endif");
  return make_stmt(at, std::move(node));
}

StmtPtr Parser::parse_for(uint32_t at) {
  ForStmt node;
  node.target = parse_sequence(true);
  bool valid_target = std::holds_alternative<NameExpr>(node.target->node);
  if (auto* tuple = std::get_if<ListExpr>(&node.target->node)) {
    valid_target = tuple->is_tuple;
    for (const auto& item : tuple->items) valid_target = valid_target && std::holds_alternative<NameExpr>(item->node);
  }
  if (!valid_target) error_at("expected a name or a tuple of names as the loop variable", node.target->offset);
  if (!is_identifier("in")) error("expected 'in' after the loop variable");
  ++pos_;
  node.iterable = parse_expression();
  expect(TokenType::kCloseStatement, "'%}'");
  node.body = parse_block_until({"endfor", "else"}, "for", at);
  if (is_statement({"else"})) {
    pos_ += 2;
    expect(TokenType::kCloseStatement, "'%}'");
    node.orelse = parse_block_until({"endfor"}, "for", at);
  }
  expect_end_tag("endfor");
  return make_stmt(at, std::move(node));
}

std::vector<Param> Parser::parse_params() {
  std::vector<Param> params;
  for (Argument& arg : parse_args(ArgMode::kParameters)) {
    Param p;
    if (arg.kind == ArgKind::kKeyword) {
      p.name = arg.name;
      p.default_value = std::move(arg.value);
    } else {
      p.name = std::get<NameExpr>(arg.value->node).name;
    }
    params.push_back(std::move(p));
  }
  return params;
}

namespace {

bool has_param(const std::vector<Param>& params, std::string_view name) {
  for (const auto& p : params) {
    if (p.name == name) return true;
  }
  return false;
}

}  // namespace

StmtPtr Parser::parse_macro(uint32_t at) {
  MacroStmt node;
  if (!is(TokenType::kIdentifier)) error("expected the macro name");
  node.name = tokens_[pos_++].value;
  node.params = parse_params();
  expect(TokenType::kCloseStatement, "'%}'");
  int varargs_before = varargs_reads_, kwargs_before = kwargs_reads_;
  node.body = parse_block_until({"endmacro"}, "macro", at);
  node.uses_varargs = varargs_reads_ > varargs_before && !has_param(node.params, "varargs");
  node.uses_kwargs = kwargs_reads_ > kwargs_before && !has_param(node.params, "kwargs");
  expect_end_tag("endmacro");
  return make_stmt(at, std::move(node));
}

StmtPtr Parser::parse_call_block(uint32_t at) {
  CallBlockStmt node;
  if (is(TokenType::kOpenParen)) node.params = parse_params();
  uint32_t callee_at = offset();
  if (!is(TokenType::kIdentifier)) error("expected a macro name after 'call'");
  ExprPtr callee = make_expr(callee_at, NameExpr{tokens_[pos_++].value});
  if (!is(TokenType::kOpenParen)) error("expected '(' after the macro name in 'call'");
  node.call = make_expr(callee_at, CallExpr{std::move(callee), parse_args(ArgMode::kCall)});
  expect(TokenType::kCloseStatement, "'%}'");
  int varargs_before = varargs_reads_, kwargs_before = kwargs_reads_;
  node.body = parse_block_until({"endcall"}, "call", at);
  node.uses_varargs = varargs_reads_ > varargs_before && !has_param(node.params, "varargs");
  node.uses_kwargs = kwargs_reads_ > kwargs_before && !has_param(node.params, "kwargs");
  expect_end_tag("endcall");
  return make_stmt(at, std::move(node));
}

StmtPtr Parser::parse_filter_block(uint32_t at) {
  FilterBlockStmt node;
  if (!is(TokenType::kIdentifier)) error("expected a filter name after 'filter'");
  node.name = tokens_[pos_++].value;
  if (is(TokenType::kOpenParen)) {
    node.args = parse_args(ArgMode::kCall);
    node.has_call = true;
  }
  expect(TokenType::kCloseStatement, "'%}'");
  node.body = parse_block_until({"endfilter"}, "filter", at);
  expect_end_tag("endfilter");
  return make_stmt(at, std::move(node));
}

Block parse(const std::vector<Token>& tokens, uint32_t end_offset) {
  return Parser(tokens, end_offset).parse_program();
}

}  // namespace beam::text::jinja
