// Statement execution: output, if, for (loop variable, filters, else, break/continue), set,
// macros and call blocks, filter blocks (see interpreter.h).
#include "text/jinja/interpreter.h"

#include "text/jinja/error.h"
#include "text/jinja/filters.h"
#include "text/jinja/overloaded.h"
#include "text/jinja/value_format.h"

namespace beam::text::jinja {
namespace {

// {% break %} / {% continue %} unwinding to the nearest enclosing for loop.
struct LoopControl {
  bool is_break;
  uint32_t offset;
};

// The `loop` variable of one iteration (a dict, as in the reference).
Value loop_info(const Value::List& items, size_t i) {
  double n = static_cast<double>(items.size()), k = static_cast<double>(i);
  Dict d;
  d.set("index", Value::integer(k + 1));
  d.set("index0", Value::integer(k));
  d.set("revindex", Value::integer(n - k));
  d.set("revindex0", Value::integer(n - k - 1));
  d.set("first", Value::boolean(i == 0));
  d.set("last", Value::boolean(i + 1 == items.size()));
  d.set("length", Value::integer(n));
  d.set("previtem", i > 0 ? items[i - 1] : Value());
  d.set("nextitem", i + 1 < items.size() ? items[i + 1] : Value());
  return Value::dict(std::move(d));
}

void append_result(const Value& v, const FormatLimits& limits, std::string& out) {
  if (!v.is_undefined() && !v.is_none()) out += display_string(v, limits);
}

}  // namespace

Interpreter::DepthGuard::DepthGuard(Interpreter& in) : in_(in) {
  if (++in_.depth_ > in_.rt_.limits().max_depth) {
    --in_.depth_;
    fail_limit("template evaluation nested deeper than " + std::to_string(in_.rt_.limits().max_depth) +
               " levels (runaway recursion?)");
  }
}

void Interpreter::run(const Block& program, const ScopePtr& globals, std::string& out) {
  try {
    exec_block(program, globals, out);
  } catch (const LoopControl& control) {
    fail(std::string(control.is_break ? "'break'" : "'continue'") + " outside of a for loop", control.offset);
  }
}

void Interpreter::exec_block(const Block& block, const ScopePtr& scope, std::string& out) {
  for (const StmtPtr& stmt : block) {
    exec(*stmt, scope, out);
    if (out.size() > rt_.limits().max_output_bytes) {
      fail_limit("template output exceeds " + std::to_string(rt_.limits().max_output_bytes) + " bytes");
    }
  }
}

void Interpreter::exec(const Stmt& stmt, const ScopePtr& scope, std::string& out) {
  DepthGuard guard(*this);
  rt_.step();
  try {
    std::visit(Overloaded{
                   [&](const TextStmt& s) { out += s.text; },
                   [&](const OutputStmt& s) { append_result(eval(*s.expr, scope), rt_.format_limits(), out); },
                   [&](const IfStmt& s) { exec_if(s, scope, out); },
                   [&](const ForStmt& s) { exec_for(s, scope, out); },
                   [&](const SetStmt& s) { exec_set(s, scope); },
                   [&](const MacroStmt& s) { scope->set(s.name, Value::callable(Callable{Callable::Macro{&s}})); },
                   [&](const CallBlockStmt& s) { exec_call_block(s, stmt, scope, out); },
                   [&](const FilterBlockStmt& s) { exec_filter_block(s, scope, out); },
                   [&](const BreakStmt&) { throw LoopControl{true, stmt.offset}; },
                   [&](const ContinueStmt&) { throw LoopControl{false, stmt.offset}; },
               },
               stmt.node);
  } catch (TemplateError& error) {
    error.locate(stmt.offset);
    throw;
  }
}

void Interpreter::exec_if(const IfStmt& s, const ScopePtr& scope, std::string& out) {
  exec_block(eval(*s.test, scope).truthy() ? s.body : s.orelse, scope, out);
}

void Interpreter::bind_loop_target(const Expr& target, const Value& item, Scope& scope) {
  if (const auto* name = std::get_if<NameExpr>(&target.node)) {
    scope.set(name->name, item);
    return;
  }
  const auto& names = std::get<ListExpr>(target.node).items;
  if (!item.is_list()) fail(std::string("cannot unpack a ") + kind_name(item.kind()) + " value into loop variables");
  const auto& values = item.as_list();
  if (values.size() != names.size()) {
    fail(std::string(values.size() < names.size() ? "too few" : "too many") + " items to unpack (expected " +
         std::to_string(names.size()) + ", got " + std::to_string(values.size()) + ")");
  }
  for (size_t i = 0; i < names.size(); ++i) scope.set(std::get<NameExpr>(names[i]->node).name, values[i]);
}

// The reference collects (and filters) the items first, then runs the body; a break or continue
// discards the output of the interrupted iteration, and the else block runs when no iteration
// ran to its end.
void Interpreter::exec_for(const ForStmt& s, const ScopePtr& scope, std::string& out) {
  auto loop_scope = std::make_shared<Scope>(scope);
  const Expr* condition = nullptr;
  const Expr* source = s.iterable.get();
  if (const auto* select = std::get_if<SelectExpr>(&s.iterable->node)) {
    source = select->value.get();
    condition = select->condition.get();
  }
  Value iterable = eval(*source, loop_scope);
  Value::List candidates;
  if (iterable.is_list()) {
    candidates = iterable.as_list();
  } else if (iterable.is_dict()) {
    for (const auto& item : iterable.as_dict().items()) candidates.push_back(Value::string(item.first));
  } else {
    fail(std::string("cannot loop over a ") + kind_name(iterable.kind()) + " value (expected a list or a dict)",
         source->offset);
  }
  Value::List items;
  for (const Value& item : candidates) {
    rt_.step();
    if (condition) {
      auto test_scope = std::make_shared<Scope>(loop_scope);
      bind_loop_target(*s.target, item, *test_scope);
      if (!eval(*condition, test_scope).truthy()) continue;
    }
    items.push_back(item);
  }
  bool no_iteration = true;
  for (size_t i = 0; i < items.size(); ++i) {
    loop_scope->set("loop", loop_info(items, i));
    bind_loop_target(*s.target, items[i], *loop_scope);
    size_t mark = out.size();
    try {
      exec_block(s.body, loop_scope, out);
    } catch (const LoopControl& control) {
      out.resize(mark);
      if (control.is_break) break;
      continue;
    }
    no_iteration = false;
  }
  if (no_iteration) exec_block(s.orelse, loop_scope, out);
}

void Interpreter::exec_set(const SetStmt& s, const ScopePtr& scope) {
  Value rhs;
  if (s.value) {
    rhs = eval(*s.value, scope);
  } else {
    std::string captured;
    exec_block(s.body, scope, captured);
    rhs = rt_.make_string(std::move(captured));
  }
  const Expr& target = *s.target;
  if (const auto* name = std::get_if<NameExpr>(&target.node)) {
    scope->set(name->name, std::move(rhs));
  } else if (const auto* tuple = std::get_if<ListExpr>(&target.node)) {
    if (!tuple->is_tuple) fail("cannot assign to a list literal", target.offset);
    for (const auto& item : tuple->items) {
      if (!std::holds_alternative<NameExpr>(item->node)) fail("can only unpack into names in 'set'", item->offset);
    }
    bind_loop_target(target, rhs, *scope);
  } else {
    const auto& member = std::get<MemberExpr>(target.node);
    Value object = eval(*member.object, scope);
    if (!object.is(ValueKind::kNamespace)) {
      fail(std::string("cannot assign an attribute of a ") + kind_name(object.kind()) + " value (only of a namespace)",
           target.offset);
    }
    const auto* property = std::get_if<NameExpr>(&member.property->node);
    if (!property) fail("namespace attributes must be assigned by name", member.property->offset);
    object.namespace_dict().set(property->name, std::move(rhs));
  }
}

void Interpreter::exec_call_block(const CallBlockStmt& s, const Stmt& stmt, const ScopePtr& scope, std::string& out) {
  Value caller = Value::callable(Callable{Callable::Caller{&s, scope}});
  const auto& call = std::get<CallExpr>(s.call->node);
  CallArgs args = eval_args(call.args, scope);
  Value callee = eval(*call.callee, scope);
  if (!callee.is(ValueKind::kCallable)) {
    fail("'" + std::get<NameExpr>(call.callee->node).name + "' is not a macro (it is " + kind_name(callee.kind()) + ")",
         stmt.offset);
  }
  auto call_scope = std::make_shared<Scope>(scope);
  call_scope->set("caller", std::move(caller));
  append_result(call_value(callee, std::move(args), call_scope), rt_.format_limits(), out);
}

void Interpreter::exec_filter_block(const FilterBlockStmt& s, const ScopePtr& scope, std::string& out) {
  std::string captured;
  exec_block(s.body, scope, captured);
  Value body = rt_.make_string(std::move(captured));
  append_result(apply_filter(rt_, body, s.name, eval_args(s.args, scope), s.has_call), rt_.format_limits(), out);
}

// Binds parameters from positional, then keyword arguments; defaults are evaluated last, in the
// macro's own scope. Extra arguments are errors unless the body reads varargs / kwargs.
void Interpreter::bind_arguments(const std::string& callee, const std::vector<Param>& params, bool uses_varargs,
                                 bool uses_kwargs, CallArgs args, const ScopePtr& scope) {
  std::vector<const Param*> pending_defaults;
  for (size_t i = 0; i < params.size(); ++i) {
    const Param& p = params[i];
    std::optional<Value> value;
    if (i < args.positional.size()) {
      value = args.positional[i];
    } else {
      for (auto it = args.keyword.begin(); it != args.keyword.end(); ++it) {
        if (it->first == p.name) {
          value = std::move(it->second);
          args.keyword.erase(it);
          break;
        }
      }
    }
    if (!value && p.default_value) pending_defaults.push_back(&p);
    scope->set(p.name, value ? std::move(*value) : Value());
  }
  if (uses_kwargs) {
    Dict kwargs;
    for (auto& [key, value] : args.keyword) kwargs.set(key, std::move(value));
    scope->set("kwargs", Value::dict(std::move(kwargs)));
  } else if (!args.keyword.empty()) {
    fail("macro '" + callee + "' takes no keyword argument '" + args.keyword.front().first + "'");
  }
  if (uses_varargs) {
    Value::List extra;
    for (size_t i = params.size(); i < args.positional.size(); ++i) extra.push_back(args.positional[i]);
    scope->set("varargs", Value::list(std::move(extra)));
  } else if (args.positional.size() > params.size()) {
    fail("macro '" + callee + "' takes not more than " + std::to_string(params.size()) + " argument(s)");
  }
  for (const Param* p : pending_defaults) scope->set(p->name, eval(*p->default_value, scope));
}

Value Interpreter::call_macro(const MacroStmt& macro, CallArgs args, const ScopePtr& caller_scope) {
  auto macro_scope = std::make_shared<Scope>(caller_scope);
  bind_arguments(macro.name, macro.params, macro.uses_varargs, macro.uses_kwargs, std::move(args), macro_scope);
  std::string out;
  exec_block(macro.body, macro_scope, out);
  return rt_.make_string(std::move(out));
}

Value Interpreter::call_caller(const Callable::Caller& caller, CallArgs args) {
  ScopePtr defining = caller.scope.lock();
  if (!defining) fail("caller() called after its call block ended");
  auto block_scope = std::make_shared<Scope>(defining);
  bind_arguments("caller", caller.node->params, caller.node->uses_varargs, caller.node->uses_kwargs, std::move(args),
                 block_scope);
  std::string out;
  exec_block(caller.node->body, block_scope, out);
  return rt_.make_string(std::move(out));
}

}  // namespace beam::text::jinja
