// The recursive-descent parser shared by parser.cpp (statements) and parser_expr.cpp
// (expressions). Internal to the jinja engine.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace beam::text::jinja {

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, uint32_t end_offset) : tokens_(tokens), end_offset_(end_offset) {}

  Block parse_program();

 private:
  enum class ArgMode { kCall, kParameters };
  static constexpr int kMaxNesting = 256;

  // Token access.
  const Token* peek(size_t ahead = 0) const {
    return pos_ + ahead < tokens_.size() ? &tokens_[pos_ + ahead] : nullptr;
  }
  bool is(TokenType type, size_t ahead = 0) const {
    const Token* t = peek(ahead);
    return t && t->type == type;
  }
  bool is_identifier(std::string_view name, size_t ahead = 0) const {
    const Token* t = peek(ahead);
    return t && t->type == TokenType::kIdentifier && t->value == name;
  }
  // At `{% name` for one of `names`.
  bool is_statement(std::initializer_list<std::string_view> names) const;
  uint32_t offset() const { return pos_ < tokens_.size() ? tokens_[pos_].offset : end_offset_; }
  const Token& next(const char* expected);
  const Token& expect(TokenType type, const char* what);
  void expect_identifier(std::string_view name);
  [[noreturn]] void error(const std::string& message) const;
  [[noreturn]] void error_at(const std::string& message, uint32_t at) const;

  // Statements (parser.cpp).
  StmtPtr parse_any();
  StmtPtr parse_statement();
  Block parse_block_until(std::initializer_list<std::string_view> ends, const char* opener, uint32_t opened_at);
  void expect_end_tag(std::string_view name);
  StmtPtr parse_set(uint32_t at);
  StmtPtr parse_if(uint32_t at);
  StmtPtr parse_for(uint32_t at);
  StmtPtr parse_macro(uint32_t at);
  StmtPtr parse_call_block(uint32_t at);
  StmtPtr parse_filter_block(uint32_t at);

  // Expressions (parser_expr.cpp), highest binding last.
  ExprPtr parse_expression();
  ExprPtr parse_sequence(bool primary_only);
  ExprPtr parse_if_expression();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_comparison();
  ExprPtr parse_additive();
  ExprPtr parse_multiplicative();
  ExprPtr parse_power();
  ExprPtr parse_test();
  ExprPtr parse_filter();
  ExprPtr parse_unary_sign();
  ExprPtr parse_call_member();
  ExprPtr parse_call(ExprPtr callee);
  ExprPtr parse_member_chain(ExprPtr object);
  ExprPtr parse_subscript(uint32_t at);
  ExprPtr parse_primary();
  ExprPtr parse_list_literal(uint32_t at);
  ExprPtr parse_dict_literal(uint32_t at);
  std::vector<Argument> parse_args(ArgMode mode);
  std::vector<Param> parse_params();

  // Guards recursion so hostile templates fail cleanly instead of overflowing the stack.
  class NestingGuard {
   public:
    explicit NestingGuard(Parser& p);
    ~NestingGuard() { --parser_.depth_; }
    NestingGuard(const NestingGuard&) = delete;
    NestingGuard& operator=(const NestingGuard&) = delete;

   private:
    Parser& parser_;
  };

  // Counts each link of a left-deep chain (a + b + c, x|f|g, a.b.c) as one level of nesting, since
  // evaluating and destroying the resulting tree recurses that deep.
  class ChainGuard {
   public:
    explicit ChainGuard(Parser& p) : parser_(p) {}
    ~ChainGuard() { parser_.depth_ -= links_; }
    ChainGuard(const ChainGuard&) = delete;
    ChainGuard& operator=(const ChainGuard&) = delete;
    void link();

   private:
    Parser& parser_;
    int links_ = 0;
  };

  const std::vector<Token>& tokens_;
  uint32_t end_offset_;
  size_t pos_ = 0;
  int depth_ = 0;
  // Reads of `varargs` / `kwargs` seen so far; a macro compares them around its body.
  int varargs_reads_ = 0;
  int kwargs_reads_ = 0;
};

template <typename Node>
ExprPtr make_expr(uint32_t offset, Node node) {
  auto e = std::make_unique<Expr>();
  e->offset = offset;
  e->node = std::move(node);
  return e;
}

template <typename Node>
StmtPtr make_stmt(uint32_t offset, Node node) {
  auto s = std::make_unique<Stmt>();
  s->offset = offset;
  s->node = std::move(node);
  return s;
}

}  // namespace beam::text::jinja
