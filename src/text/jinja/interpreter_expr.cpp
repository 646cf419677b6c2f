// Expression evaluation: names, literals, member access and slicing, calls, filters, tests and
// operators (see interpreter.h).
#include <cmath>

#include "text/jinja/error.h"
#include "text/jinja/filters.h"
#include "text/jinja/globals.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/js_string.h"
#include "text/jinja/methods.h"
#include "text/jinja/operators.h"
#include "text/jinja/overloaded.h"
#include "text/jinja/is_tests.h"

namespace beam::text::jinja {
namespace {

// The element at a JavaScript Array.prototype.at() index of a sequence of `length` items.
std::optional<size_t> at_index(double index, size_t length) {
  if (std::isnan(index)) index = 0;
  index = std::trunc(index);
  if (index < 0) index += static_cast<double>(length);
  if (index < 0 || index >= static_cast<double>(length)) return std::nullopt;
  return static_cast<size_t>(index);
}

// obj.name / obj[key]: dict entries first, then the builtin methods; list and string indices
// (negative from the end) and `length`; undefined when there is nothing.
Value member_of(const Value& object, const Value& property) {
  switch (object.kind()) {
    case ValueKind::kDict: case ValueKind::kNamespace: {
      if (!property.is_string()) fail(std::string("cannot look up a ") + kind_name(property.kind()) + " key in a dict");
      if (const Value* v = object.as_dict().find(property.as_string())) return *v;
      if (object.is_dict()) return builtin_attribute(object, property.as_string()).value_or(Value());
      return Value();
    }
    case ValueKind::kList: case ValueKind::kString: {
      if (property.is(ValueKind::kInt)) {
        if (object.is_list()) {
          auto i = at_index(property.as_number(), object.as_list().size());
          return i ? object.as_list()[*i] : Value();
        }
        double index = property.as_number();
        if (std::isnan(index)) index = 0;
        if (std::fabs(index) > 9e15) return Value();
        std::string unit;
        bool found = utf16_unit_at(object.as_string(), static_cast<int64_t>(index), unit);
        return found ? Value::string(std::move(unit)) : Value();
      }
      if (property.is_string()) return builtin_attribute(object, property.as_string()).value_or(Value());
      fail(std::string("cannot index a ") + kind_name(object.kind()) + " with a " + kind_name(property.kind()));
    }
    case ValueKind::kUndefined: case ValueKind::kNone: case ValueKind::kBool: case ValueKind::kInt:
    case ValueKind::kFloat: case ValueKind::kCallable:
      if (!property.is_string()) {
        fail(std::string("cannot look up a ") + kind_name(property.kind()) + " key in a " + kind_name(object.kind()) +
             " value");
      }
      return Value();
  }
  return Value();
}

double js_max(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }
double js_min(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }

// Python slicing with the reference's clamping rules; returns the selected positions.
std::vector<size_t> slice_positions(size_t length, std::optional<double> start, std::optional<double> stop,
                                    std::optional<double> step) {
  double n = static_cast<double>(length), st = step.value_or(1);
  double direction = std::isnan(st) ? NAN : (st > 0 ? 1 : st < 0 ? -1 : 0);
  double a, b;
  if (direction >= 0) {
    double s0 = start.value_or(0), s1 = stop.value_or(n);
    a = s0 < 0 ? js_max(n + s0, 0) : js_min(s0, n);
    b = s1 < 0 ? js_max(n + s1, 0) : js_min(s1, n);
  } else {
    double s0 = start.value_or(n - 1), s1 = stop.value_or(-1);
    a = s0 < 0 ? js_max(n + s0, -1) : js_min(s0, n - 1);
    b = s1 < -1 ? js_max(n + s1, -1) : js_min(s1, n - 1);
  }
  std::vector<size_t> positions;
  for (double i = a; direction * i < direction * b && positions.size() <= length; i += st) {
    if (i >= 0 && i < n) positions.push_back(static_cast<size_t>(i));
  }
  return positions;
}

std::string callee_description(const Expr& callee) {
  if (const auto* name = std::get_if<NameExpr>(&callee.node)) return "'" + name->name + "'";
  if (const auto* member = std::get_if<MemberExpr>(&callee.node)) {
    if (const auto* prop = std::get_if<NameExpr>(&member->property->node)) return "'" + prop->name + "'";
  }
  return "the called expression";
}

}  // namespace

Value Interpreter::eval(const Expr& expr, const ScopePtr& scope) {
  DepthGuard guard(*this);
  rt_.step();
  try {
    return std::visit(
        Overloaded{
            [&](const LiteralExpr& e) { return e.value; },
            [&](const NameExpr& e) {
              const Value* v = scope->lookup(e.name);
              return v ? *v : Value();
            },
            [&](const MemberExpr& e) { return eval_member(e, scope); },
            [&](const SliceExpr&) -> Value { fail("a slice can only appear inside '[]'"); },
            [&](const CallExpr& e) { return eval_call(e, scope); },
            [&](const UnaryExpr& e) { return apply_unary(e.op, eval(*e.operand, scope)); },
            [&](const BinaryExpr& e) { return eval_binary(e, scope); },
            [&](const FilterExpr& e) { return eval_filter(e, scope); },
            [&](const TestExpr& e) { return eval_test(e, scope); },
            [&](const SelectExpr& e) { return eval(*e.condition, scope).truthy() ? eval(*e.value, scope) : Value(); },
            [&](const TernaryExpr& e) {
              return eval(*e.condition, scope).truthy() ? eval(*e.if_true, scope) : eval(*e.if_false, scope);
            },
            [&](const ListExpr& e) {
              Value::List items;
              items.reserve(e.items.size());
              for (const auto& item : e.items) items.push_back(eval(*item, scope));
              return rt_.make_list(std::move(items));
            },
            [&](const DictExpr& e) { return eval_dict(e, scope); },
        },
        expr.node);
  } catch (TemplateError& error) {
    error.locate(expr.offset);
    throw;
  }
}

Value Interpreter::eval_member(const MemberExpr& e, const ScopePtr& scope) {
  Value object = eval(*e.object, scope);
  if (e.computed) {
    if (const auto* slice = std::get_if<SliceExpr>(&e.property->node)) return eval_slice(object, *slice, scope);
    return member_of(object, eval(*e.property, scope));
  }
  if (const auto* name = std::get_if<NameExpr>(&e.property->node)) return member_of(object, Value::string(name->name));
  return member_of(object, std::get<LiteralExpr>(e.property->node).value);
}

Value Interpreter::eval_slice(const Value& object, const SliceExpr& slice, const ScopePtr& scope) {
  if (!object.is_list() && !object.is_string()) fail(std::string("cannot slice a ") + kind_name(object.kind()) + " value");
  auto part = [&](const ExprPtr& p) -> std::optional<double> {
    if (!p) return std::nullopt;
    Value v = eval(*p, scope);
    if (v.is_undefined()) return std::nullopt;
    if (!v.is(ValueKind::kInt)) fail(std::string("slice indices must be integers, got ") + kind_name(v.kind()));
    return v.as_number();
  };
  std::optional<double> start = part(slice.start), stop = part(slice.stop), step = part(slice.step);
  if (object.is_list()) {
    const auto& items = object.as_list();
    Value::List out;
    for (size_t i : slice_positions(items.size(), start, stop, step)) out.push_back(items[i]);
    return rt_.make_list(std::move(out));
  }
  const std::string& s = object.as_string();
  std::vector<size_t> bounds = code_point_offsets(s);
  std::string out;
  for (size_t i : slice_positions(bounds.size() - 1, start, stop, step)) out.append(s, bounds[i], bounds[i + 1] - bounds[i]);
  return rt_.make_string(std::move(out));
}

CallArgs Interpreter::eval_args(const std::vector<Argument>& args, const ScopePtr& scope) {
  CallArgs out;
  // Like the reference (and Python), every positional part is evaluated before any keyword value.
  for (const Argument& arg : args) {
    if (arg.kind == ArgKind::kPositional) {
      out.positional.push_back(eval(*arg.value, scope));
    } else if (arg.kind == ArgKind::kSpread) {
      Value v = eval(*arg.value, scope);
      if (!v.is_list()) fail(std::string("cannot unpack a ") + kind_name(v.kind()) + " value with '*'", arg.value->offset);
      for (const Value& item : v.as_list()) out.positional.push_back(item);
    }
  }
  auto add_keyword = [&](const std::string& key, Value value, uint32_t at) {
    if (out.keyword_arg(key)) fail("got multiple values for keyword argument '" + key + "'", at);
    out.keyword.emplace_back(key, std::move(value));
  };
  for (const Argument& arg : args) {
    if (arg.kind == ArgKind::kKeyword) {
      add_keyword(arg.name, eval(*arg.value, scope), arg.value->offset);
    } else if (arg.kind == ArgKind::kKeywordSpread) {
      Value v = eval(*arg.value, scope);
      if (!v.is_dict()) fail(std::string("argument after '**' must be a dict, not ") + kind_name(v.kind()), arg.value->offset);
      for (const auto& [key, value] : v.as_dict().items()) add_keyword(key, value, arg.value->offset);
    }
  }
  return out;
}

Value Interpreter::eval_call(const CallExpr& e, const ScopePtr& scope) {
  CallArgs args = eval_args(e.args, scope);
  Value callee = eval(*e.callee, scope);
  if (!callee.is(ValueKind::kCallable)) {
    fail(callee_description(*e.callee) + " is not callable (it is " + kind_name(callee.kind()) + ")");
  }
  return call_value(callee, std::move(args), scope);
}

Value Interpreter::call_value(const Value& callee, CallArgs args, const ScopePtr& scope) {
  return std::visit(Overloaded{
                        [&](const Callable::Builtin& b) { return call_builtin(rt_, b.fn, args); },
                        [&](const Callable::BoundMethod& m) { return call_method(rt_, m.method, m.receiver, args); },
                        [&](const Callable::Macro& m) { return call_macro(*m.node, std::move(args), scope); },
                        [&](const Callable::Caller& c) { return call_caller(c, std::move(args)); },
                    },
                    callee.as_callable().target);
}

Value Interpreter::eval_filter(const FilterExpr& e, const ScopePtr& scope) {
  Value operand = eval(*e.operand, scope);
  if (e.has_call && (e.name == "selectattr" || e.name == "rejectattr")) {
    for (const Argument& arg : e.args) {
      const auto* literal = std::get_if<LiteralExpr>(&arg.value->node);
      if (arg.kind != ArgKind::kPositional || !literal || !literal->value.is_string()) {
        fail("arguments of '" + e.name + "' must be string literals", arg.value->offset);
      }
    }
  }
  return apply_filter(rt_, operand, e.name, eval_args(e.args, scope), e.has_call);
}

Value Interpreter::eval_test(const TestExpr& e, const ScopePtr& scope) {
  Value operand = eval(*e.operand, scope);
  bool result = apply_test(rt_, e.name, operand, eval_args(e.args, scope));
  return Value::boolean(result != e.negated);
}

Value Interpreter::eval_binary(const BinaryExpr& e, const ScopePtr& scope) {
  Value left = eval(*e.left, scope);
  if (e.op == BinaryOp::kAnd) return left.truthy() ? eval(*e.right, scope) : left;
  if (e.op == BinaryOp::kOr) return left.truthy() ? left : eval(*e.right, scope);
  return apply_binary(rt_, e.op, left, eval(*e.right, scope));
}

Value Interpreter::eval_dict(const DictExpr& e, const ScopePtr& scope) {
  Dict d;
  for (const auto& [key_expr, value_expr] : e.entries) {
    Value key = eval(*key_expr, scope);
    if (!key.is_string()) fail(std::string("dict keys must be strings, got ") + kind_name(key.kind()), key_expr->offset);
    d.set(key.as_string(), eval(*value_expr, scope));
  }
  rt_.step(d.size());
  return Value::dict(std::move(d));
}

}  // namespace beam::text::jinja
