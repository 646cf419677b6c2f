// Attributes the runtime provides on values: string methods (upper, lower, strip, lstrip, rstrip,
// title, capitalize, startswith, endswith, split, replace) and `length`; list `length`; dict
// methods (get, items, keys, values, dictsort). Semantics follow the reference, which uses
// JavaScript string functions (strip() and friends ignore their argument and trim whitespace).
#pragma once

#include <optional>
#include <string_view>

#include "text/jinja/call_args.h"
#include "text/jinja/runtime.h"
#include "text/jinja/value.h"

namespace beam::text::jinja {

// The builtin attribute `name` of `receiver` (a bound method or a property), if it has one.
std::optional<Value> builtin_attribute(const Value& receiver, std::string_view name);

Value call_method(Runtime& rt, Method method, const Value& receiver, const CallArgs& args);

// dict.items() as a list of [key, value] pairs.
Value dict_items(Runtime& rt, const Dict& dict);

// Python's str.split(sep=None, maxsplit=-1) as the reference implements it.
Value split_string(Runtime& rt, const std::string& s, const Value& sep, const Value& maxsplit);

// Python's str.replace(old, new, count) as the reference implements it (count < 0: all).
std::string replace_string(Runtime& rt, const std::string& s, const std::string& from, const std::string& to,
                           double count);

}  // namespace beam::text::jinja
