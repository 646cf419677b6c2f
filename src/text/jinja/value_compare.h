// Equality and ordering of values as the reference computes them: JavaScript `==` (loose) for
// the == / != operators, `===` for `in` and the eq test, SameValueZero for unique, and the typed
// three-way comparison used by sort and dictsort.
#pragma once

#include <functional>

#include "text/jinja/value.h"
#include "text/jinja/value_format.h"

namespace beam::text::jinja {

bool loose_equal(const Value& a, const Value& b, const FormatLimits& limits);
bool strict_equal(const Value& a, const Value& b);
bool same_value_zero(const Value& a, const Value& b);
// -1, 0 or 1; numbers and booleans compare numerically, strings in UTF-16 order (lowercased
// unless case_sensitive), none with none and undefined with undefined are equal; any other pair
// fails.
int compare_for_sort(const Value& a, const Value& b, bool case_sensitive);
// Stable merge sort that stays in bounds whatever the comparator answers (std::sort does not).
void stable_sort_values(Value::List& items, const std::function<bool(const Value&, const Value&)>& less);

}  // namespace beam::text::jinja
