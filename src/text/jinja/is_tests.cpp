// `is` tests (see tests.h).
#include "text/jinja/is_tests.h"

#include <cmath>
#include <string>

#include "text/jinja/js_string.h"
#include "text/jinja/operators.h"
#include "text/jinja/value_compare.h"

namespace beam::text::jinja {
namespace {

const Value& argument(std::string_view name, const CallArgs& args) {
  if (args.positional.empty()) fail("test '" + std::string(name) + "' needs an argument");
  return args.positional[0];
}

bool parity(std::string_view name, const Value& operand, bool odd) {
  if (!operand.is(ValueKind::kInt)) fail("cannot apply test '" + std::string(name) + "' to " + kind_name(operand.kind()));
  bool is_odd = std::fmod(operand.as_number(), 2) != 0;
  return is_odd == odd;
}

bool case_test(std::string_view name, const Value& operand, bool upper) {
  if (!operand.is_string()) fail("cannot apply test '" + std::string(name) + "' to " + kind_name(operand.kind()));
  const std::string& s = operand.as_string();
  return s == (upper ? js_to_upper(s) : js_to_lower(s));
}

bool compare_test(Runtime& rt, BinaryOp op, std::string_view name, const Value& operand, const CallArgs& args) {
  return apply_binary(rt, op, operand, argument(name, args)).truthy();
}

}  // namespace

bool apply_test(Runtime& rt, std::string_view name, const Value& operand, const CallArgs& args) {
  ValueKind k = operand.kind();
  if (name == "defined") return k != ValueKind::kUndefined;
  if (name == "undefined") return k == ValueKind::kUndefined;
  if (name == "none") return k == ValueKind::kNone;
  if (name == "boolean") return k == ValueKind::kBool;
  if (name == "true") return k == ValueKind::kBool && operand.as_bool();
  if (name == "false") return k == ValueKind::kBool && !operand.as_bool();
  if (name == "string") return k == ValueKind::kString;
  if (name == "number") return operand.is_number();
  if (name == "integer") return k == ValueKind::kInt;
  if (name == "float") return k == ValueKind::kFloat;
  if (name == "iterable") return k == ValueKind::kList || k == ValueKind::kString;
  if (name == "mapping") return k == ValueKind::kDict;
  if (name == "sequence") return k == ValueKind::kList || k == ValueKind::kDict || k == ValueKind::kString;
  if (name == "callable") return k == ValueKind::kCallable;
  if (name == "odd") return parity(name, operand, true);
  if (name == "even") return parity(name, operand, false);
  if (name == "lower") return case_test(name, operand, false);
  if (name == "upper") return case_test(name, operand, true);
  if (name == "eq" || name == "equalto" || name == "==") return strict_equal(operand, argument(name, args));
  if (name == "sameas") return strict_equal(operand, argument(name, args));
  if (name == "ne" || name == "!=") return !strict_equal(operand, argument(name, args));
  if (name == "lt" || name == "lessthan") return compare_test(rt, BinaryOp::kLt, name, operand, args);
  if (name == "le") return compare_test(rt, BinaryOp::kLe, name, operand, args);
  if (name == "gt" || name == "greaterthan") return compare_test(rt, BinaryOp::kGt, name, operand, args);
  if (name == "ge") return compare_test(rt, BinaryOp::kGe, name, operand, args);
  if (name == "in") return compare_test(rt, BinaryOp::kIn, name, operand, args);
  if (name == "divisibleby") {
    const Value& n = argument(name, args);
    if (!operand.is_number() || !n.is_number()) fail("test 'divisibleby' needs numbers");
    if (n.as_number() == 0) fail("test 'divisibleby' with a zero divisor");
    return std::fmod(operand.as_number(), n.as_number()) == 0;
  }
  fail("unknown test '" + std::string(name) + "'");
}

}  // namespace beam::text::jinja
