// Walks the syntax tree: statements append to an output string, expressions produce Values.
// Scoping follows the reference: `set` writes the innermost scope, a for loop and a macro call
// each open a scope, and macros see the caller's variables (dynamic scope).
// Statements live in interpreter.cpp, expressions in interpreter_expr.cpp.
#pragma once

#include <string>

#include "text/jinja/ast.h"
#include "text/jinja/call_args.h"
#include "text/jinja/runtime.h"
#include "text/jinja/scope.h"
#include "text/jinja/value.h"

namespace beam::text::jinja {

// One render's tree walker; owned by that render (single thread).
class Interpreter {
 public:
  explicit Interpreter(Runtime& rt) : rt_(rt) {}

  // Renders `program` with `globals` as the outermost scope, appending to `out`.
  void run(const Block& program, const ScopePtr& globals, std::string& out);

 private:
  // Statements (interpreter.cpp).
  void exec_block(const Block& block, const ScopePtr& scope, std::string& out);
  void exec(const Stmt& stmt, const ScopePtr& scope, std::string& out);
  void exec_if(const IfStmt& s, const ScopePtr& scope, std::string& out);
  void exec_for(const ForStmt& s, const ScopePtr& scope, std::string& out);
  void exec_set(const SetStmt& s, const ScopePtr& scope);
  void exec_call_block(const CallBlockStmt& s, const Stmt& stmt, const ScopePtr& scope, std::string& out);
  void exec_filter_block(const FilterBlockStmt& s, const ScopePtr& scope, std::string& out);
  void bind_loop_target(const Expr& target, const Value& item, Scope& scope);
  void bind_arguments(const std::string& callee, const std::vector<Param>& params, bool uses_varargs,
                      bool uses_kwargs, CallArgs args, const ScopePtr& scope);
  Value call_macro(const MacroStmt& macro, CallArgs args, const ScopePtr& caller_scope);
  Value call_caller(const Callable::Caller& caller, CallArgs args);

  // Expressions (interpreter_expr.cpp).
  Value eval(const Expr& expr, const ScopePtr& scope);
  Value eval_member(const MemberExpr& e, const ScopePtr& scope);
  Value eval_slice(const Value& object, const SliceExpr& slice, const ScopePtr& scope);
  Value eval_call(const CallExpr& e, const ScopePtr& scope);
  Value eval_filter(const FilterExpr& e, const ScopePtr& scope);
  Value eval_test(const TestExpr& e, const ScopePtr& scope);
  Value eval_binary(const BinaryExpr& e, const ScopePtr& scope);
  Value eval_dict(const DictExpr& e, const ScopePtr& scope);
  CallArgs eval_args(const std::vector<Argument>& args, const ScopePtr& scope);
  Value call_value(const Value& callee, CallArgs args, const ScopePtr& scope);

  // Counts nesting of eval/exec (macro recursion included) against RenderLimits::max_depth.
  class DepthGuard {
   public:
    explicit DepthGuard(Interpreter& in);
    ~DepthGuard() { --in_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    Interpreter& in_;
  };

  Runtime& rt_;
  int depth_ = 0;
};

}  // namespace beam::text::jinja
