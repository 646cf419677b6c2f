// The template syntax tree: expressions and statements, each with the byte offset of its first
// token in the template source (for error messages). Built by the parser, immutable afterwards.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "text/jinja/value.h"

namespace beam::text::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Block = std::vector<StmtPtr>;

enum class ArgKind {
  kPositional,     // f(x)
  kKeyword,        // f(name=x)
  kSpread,         // f(*xs)
  kKeywordSpread,  // f(**mapping)
};

struct Argument {
  ArgKind kind = ArgKind::kPositional;
  std::string name;  // kKeyword only
  ExprPtr value;
};

// A macro or call-block parameter, with its default value expression when it has one.
struct Param {
  std::string name;
  ExprPtr default_value;
};

enum class UnaryOp { kNot, kPlus, kMinus };

enum class BinaryOp {
  kAnd, kOr, kEq, kNe, kLt, kGt, kLe, kGe, kIn, kNotIn,
  kAdd, kSub, kConcat, kMul, kDiv, kFloorDiv, kMod, kPow,
};

struct LiteralExpr {
  Value value;  // int, float or string
};
struct NameExpr {
  std::string name;
};
// object.property, object[property] or object[start:stop:step].
struct MemberExpr {
  ExprPtr object;
  ExprPtr property;  // non-computed: a NameExpr or an int literal
  bool computed = false;
};
struct SliceExpr {
  ExprPtr start, stop, step;  // each may be null
};
struct CallExpr {
  ExprPtr callee;
  std::vector<Argument> args;
};
struct UnaryExpr {
  UnaryOp op;
  ExprPtr operand;
};
struct BinaryExpr {
  BinaryOp op;
  ExprPtr left, right;
};
// operand | name or operand | name(args): `has_call` tells the two apart (they differ for int/float).
struct FilterExpr {
  ExprPtr operand;
  std::string name;
  std::vector<Argument> args;
  bool has_call = false;
};
struct TestExpr {
  ExprPtr operand;
  bool negated = false;
  std::string name;
  std::vector<Argument> args;
};
// `value if condition` without else: undefined when the condition is false; as the iterable of a
// for loop it filters the items.
struct SelectExpr {
  ExprPtr value;
  ExprPtr condition;
};
struct TernaryExpr {
  ExprPtr condition, if_true, if_false;
};
struct ListExpr {
  std::vector<ExprPtr> items;
  bool is_tuple = false;
};
struct DictExpr {
  std::vector<std::pair<ExprPtr, ExprPtr>> entries;
};

struct Expr {
  uint32_t offset = 0;
  std::variant<LiteralExpr, NameExpr, MemberExpr, SliceExpr, CallExpr, UnaryExpr, BinaryExpr, FilterExpr,
               TestExpr, SelectExpr, TernaryExpr, ListExpr, DictExpr>
      node;
};

struct TextStmt {
  std::string text;
};
struct OutputStmt {
  ExprPtr expr;
};
struct IfStmt {
  ExprPtr test;
  Block body;
  Block orelse;  // an elif is a nested IfStmt here
};
struct ForStmt {
  ExprPtr target;    // a NameExpr or a tuple ListExpr of names
  ExprPtr iterable;  // a SelectExpr when the loop has an `if` filter
  Block body;
  Block orelse;
};
// {% set target = value %} or {% set target %}body{% endset %}.
struct SetStmt {
  ExprPtr target;
  ExprPtr value;  // null for the block form
  Block body;
};
struct MacroStmt {
  std::string name;
  std::vector<Param> params;
  Block body;
  bool uses_varargs = false;  // the body reads `varargs` / `kwargs`, so extra arguments are allowed
  bool uses_kwargs = false;
};
// {% call(params) macro(args) %}body{% endcall %}.
struct CallBlockStmt {
  std::vector<Param> params;
  ExprPtr call;  // a CallExpr
  Block body;
  bool uses_varargs = false;
  bool uses_kwargs = false;
};
// {% filter name(args) %}body{% endfilter %}.
struct FilterBlockStmt {
  std::string name;
  std::vector<Argument> args;
  bool has_call = false;
  Block body;
};
struct BreakStmt {};
struct ContinueStmt {};

struct Stmt {
  uint32_t offset = 0;
  std::variant<TextStmt, OutputStmt, IfStmt, ForStmt, SetStmt, MacroStmt, CallBlockStmt, FilterBlockStmt,
               BreakStmt, ContinueStmt>
      node;
};

}  // namespace beam::text::jinja
