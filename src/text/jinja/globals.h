// The global names every template sees: true/false/none (and True/False/None), and the functions
// namespace(), range(), raise_exception(message) and strftime_now(format).
#pragma once

#include "text/jinja/call_args.h"
#include "text/jinja/runtime.h"
#include "text/jinja/scope.h"
#include "text/jinja/value.h"

namespace beam::text::jinja {

void install_globals(Scope& scope);

// raise_exception fails with a kRaised TemplateError carrying the template's message.
Value call_builtin(Runtime& rt, BuiltinFunction fn, const CallArgs& args);

}  // namespace beam::text::jinja
