// The `is` tests: the reference's set (defined, undefined, none, boolean, true, false, string,
// number, integer, iterable, mapping, sequence, callable, odd, even, lower, upper, eq/equalto)
// plus Python Jinja's tests that take an argument (ne, lt, le, gt, ge, in, divisibleby, sameas,
// float), which the reference cannot parse.
#pragma once

#include <string_view>

#include "text/jinja/call_args.h"
#include "text/jinja/runtime.h"
#include "text/jinja/value.h"

namespace beam::text::jinja {

// Fails (TemplateError) for an unknown test name or operands the test does not accept.
bool apply_test(Runtime& rt, std::string_view name, const Value& operand, const CallArgs& args);

}  // namespace beam::text::jinja
