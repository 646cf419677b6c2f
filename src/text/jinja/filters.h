// The filters (`value | name(args)`), dispatched on the operand's type like the reference:
// tojson, safe, default, join, int, float; on lists: list, first, last, length, reverse, sort,
// string, unique, selectattr, rejectattr, map; on strings: length, upper, lower, title,
// capitalize, trim, indent, replace, string; on numbers: abs, int, float, string, round; on
// dicts: items, length, dictsort, keys, values, get; on booleans: bool, int, float, string.
#pragma once

#include <string_view>

#include "text/jinja/call_args.h"
#include "text/jinja/runtime.h"
#include "text/jinja/value.h"

namespace beam::text::jinja {

// `has_call`: written with parentheses (`x | int()` differs from `x | int` on numbers, as in the
// reference). Fails (TemplateError) for unknown filters and unsupported operand types.
Value apply_filter(Runtime& rt, const Value& operand, std::string_view name, const CallArgs& args, bool has_call);

}  // namespace beam::text::jinja
