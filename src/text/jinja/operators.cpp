// Operator semantics (see operators.h). The order of the checks follows the reference
// interpreter's evaluateBinaryExpression, because it decides which mixed-type cases succeed.
#include "text/jinja/operators.h"

#include <cmath>

#include "text/jinja/value_compare.h"
#include "text/jinja/value_format.h"

namespace beam::text::jinja {
namespace {

bool is_numeric_like(const Value& v) { return v.is_number() || v.is(ValueKind::kBool); }
double numeric_value(const Value& v) { return v.is(ValueKind::kBool) ? (v.as_bool() ? 1 : 0) : v.as_number(); }

Value power(const Value& left, const Value& right) {
  double a = numeric_value(left), b = numeric_value(right);
  if (a == 0 && b < 0) fail("0.0 cannot be raised to a negative power");
  double result = (std::isinf(b) && std::fabs(a) == 1) ? NAN : std::pow(a, b);  // JavaScript's **
  if (!std::isfinite(result)) fail("exponentiation result is not a finite real number");
  bool is_float = left.is(ValueKind::kFloat) || right.is(ValueKind::kFloat) || b < 0;
  return is_float ? Value::floating(result) : Value::integer(result);
}

// Both operands are numbers: false (result untouched) unless `op` is arithmetic or a comparison.
bool numeric_op(BinaryOp op, const Value& left, const Value& right, Value& result) {
  double a = left.as_number(), b = right.as_number();
  bool is_float = left.is(ValueKind::kFloat) || right.is(ValueKind::kFloat);
  auto number = [&](double v) { return is_float ? Value::floating(v) : Value::integer(v); };
  switch (op) {
    case BinaryOp::kAdd: result = number(a + b); return true;
    case BinaryOp::kSub: result = number(a - b); return true;
    case BinaryOp::kMul: result = number(a * b); return true;
    case BinaryOp::kDiv: result = Value::floating(a / b); return true;
    case BinaryOp::kFloorDiv: result = number(std::floor(a / b)); return true;
    case BinaryOp::kMod: result = number(std::fmod(a, b)); return true;
    case BinaryOp::kLt: result = Value::boolean(a < b); return true;
    case BinaryOp::kGt: result = Value::boolean(a > b); return true;
    case BinaryOp::kLe: result = Value::boolean(a <= b); return true;
    case BinaryOp::kGe: result = Value::boolean(a >= b); return true;
    case BinaryOp::kAnd: case BinaryOp::kOr: case BinaryOp::kEq: case BinaryOp::kNe: case BinaryOp::kIn:
    case BinaryOp::kNotIn: case BinaryOp::kConcat: case BinaryOp::kPow:
      return false;
  }
  return false;
}

bool list_contains(const Value::List& items, const Value& needle) {
  for (const Value& item : items) {
    if (strict_equal(item, needle)) return true;
  }
  return false;
}

}  // namespace

const char* binary_op_spelling(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAnd: return "and";
    case BinaryOp::kOr: return "or";
    case BinaryOp::kEq: return "==";
    case BinaryOp::kNe: return "!=";
    case BinaryOp::kLt: return "<";
    case BinaryOp::kGt: return ">";
    case BinaryOp::kLe: return "<=";
    case BinaryOp::kGe: return ">=";
    case BinaryOp::kIn: return "in";
    case BinaryOp::kNotIn: return "not in";
    case BinaryOp::kAdd: return "+";
    case BinaryOp::kSub: return "-";
    case BinaryOp::kConcat: return "~";
    case BinaryOp::kMul: return "*";
    case BinaryOp::kDiv: return "/";
    case BinaryOp::kFloorDiv: return "//";
    case BinaryOp::kMod: return "%";
    case BinaryOp::kPow: return "**";
  }
  return "?";
}

Value apply_binary(Runtime& rt, BinaryOp op, const Value& left, const Value& right) {
  FormatLimits limits = rt.format_limits();
  if (op == BinaryOp::kEq) return Value::boolean(loose_equal(left, right, limits));
  if (op == BinaryOp::kNe) return Value::boolean(!loose_equal(left, right, limits));
  bool membership = op == BinaryOp::kIn || op == BinaryOp::kNotIn;
  std::string spelled = std::string("'") + binary_op_spelling(op) + "'";
  if (left.is_undefined() || right.is_undefined()) {
    // `x in undefined` is false (and `not in` true); anything else on undefined is an error.
    if (right.is_undefined() && membership) return Value::boolean(op == BinaryOp::kNotIn);
    fail("cannot apply " + spelled + " to an undefined value");
  }
  if (left.is_none() || right.is_none()) fail("cannot apply " + spelled + " to none");
  if (op == BinaryOp::kConcat) return rt.make_string(js_raw_string(left, limits) + js_raw_string(right, limits));
  if (op == BinaryOp::kPow && is_numeric_like(left) && is_numeric_like(right)) return power(left, right);
  if (left.is_number() && right.is_number()) {
    Value result;
    if (numeric_op(op, left, right, result)) return result;
  } else if (left.is_list() && right.is_list()) {
    if (op == BinaryOp::kAdd) {
      Value::List joined = left.as_list();
      rt.check_list_size(joined.size() + right.as_list().size());
      joined.insert(joined.end(), right.as_list().begin(), right.as_list().end());
      return rt.make_list(std::move(joined));
    }
  } else if (right.is_list() && membership) {
    bool found = list_contains(right.as_list(), left);
    return Value::boolean(found == (op == BinaryOp::kIn));
  }
  if ((left.is_string() || right.is_string()) && op == BinaryOp::kAdd) {
    return rt.make_string(js_raw_string(left, limits) + js_raw_string(right, limits));
  }
  if (left.is_string() && right.is_string() && membership) {
    bool found = right.as_string().find(left.as_string()) != std::string::npos;
    return Value::boolean(found == (op == BinaryOp::kIn));
  }
  if (left.is_string() && right.is_dict() && membership) {
    bool found = right.as_dict().find(left.as_string()) != nullptr;
    return Value::boolean(found == (op == BinaryOp::kIn));
  }
  fail("unsupported operand types for " + spelled + ": " + kind_name(left.kind()) + " and " + kind_name(right.kind()));
}

Value apply_unary(UnaryOp op, const Value& operand) {
  switch (op) {
    case UnaryOp::kNot: return Value::boolean(!operand.truthy());
    case UnaryOp::kPlus: case UnaryOp::kMinus: {
      if (!is_numeric_like(operand)) {
        fail(std::string("bad operand type for unary ") + (op == UnaryOp::kMinus ? "-" : "+") + ": " +
             kind_name(operand.kind()));
      }
      double v = numeric_value(operand) * (op == UnaryOp::kMinus ? -1 : 1);
      return operand.is(ValueKind::kFloat) ? Value::floating(v) : Value::integer(v);
    }
  }
  return Value();
}

}  // namespace beam::text::jinja
