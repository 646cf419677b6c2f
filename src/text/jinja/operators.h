// Unary and binary operators (everything but the short-circuiting `and` / `or`), with the
// reference's type rules: `+` concatenates when either side is a string, `/` always yields a
// float, `~` stringifies both sides, comparisons need numbers, `in` works on lists, strings and
// dict keys, and undefined or none operands are errors (except `x in undefined`).
#pragma once

#include "text/jinja/ast.h"
#include "text/jinja/runtime.h"
#include "text/jinja/value.h"

namespace beam::text::jinja {

Value apply_binary(Runtime& rt, BinaryOp op, const Value& left, const Value& right);
Value apply_unary(UnaryOp op, const Value& operand);
const char* binary_op_spelling(BinaryOp op);

}  // namespace beam::text::jinja
