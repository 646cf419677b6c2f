// Value equality and ordering (see value_compare.h).
#include "text/jinja/value_compare.h"

#include <algorithm>
#include <cmath>

#include "text/jinja/error.h"
#include "text/jinja/js_number.h"
#include "text/jinja/js_string.h"

namespace beam::text::jinja {
namespace {

bool is_nullish(const Value& v) { return v.is_undefined() || v.is_none(); }
bool is_object(const Value& v) {
  return v.is_list() || v.is_dict() || v.is(ValueKind::kNamespace) || v.is(ValueKind::kCallable);
}
bool is_numeric_like(const Value& v) { return v.is_number() || v.is(ValueKind::kBool); }
double numeric_value(const Value& v) { return v.is(ValueKind::kBool) ? (v.as_bool() ? 1 : 0) : v.as_number(); }

// ToPrimitive of an object for `==` against a string or number.
Value to_primitive(const Value& v, const FormatLimits& limits) {
  if (v.is(ValueKind::kCallable)) return Value::string("function");
  return Value::string(js_raw_string(v, limits));
}

}  // namespace

bool strict_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.as_number() == b.as_number();
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::kUndefined: case ValueKind::kNone: return true;
    case ValueKind::kBool: return a.as_bool() == b.as_bool();
    case ValueKind::kString: return a.as_string() == b.as_string();
    case ValueKind::kInt: case ValueKind::kFloat: return a.as_number() == b.as_number();
    case ValueKind::kList: case ValueKind::kDict: case ValueKind::kNamespace: case ValueKind::kCallable:
      return a.identity() == b.identity();
  }
  return false;
}

bool same_value_zero(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number() && std::isnan(a.as_number()) && std::isnan(b.as_number())) return true;
  return strict_equal(a, b);
}

bool loose_equal(const Value& a, const Value& b, const FormatLimits& limits) {
  if (a.is_number() && b.is_number()) return a.as_number() == b.as_number();
  if (a.kind() == b.kind()) return strict_equal(a, b);
  if (is_nullish(a) || is_nullish(b)) return is_nullish(a) && is_nullish(b);
  if (is_object(a) && is_object(b)) return false;  // different objects
  if (a.is(ValueKind::kBool)) return loose_equal(Value::integer(numeric_value(a)), b, limits);
  if (b.is(ValueKind::kBool)) return loose_equal(a, Value::integer(numeric_value(b)), limits);
  if (is_object(a)) return loose_equal(to_primitive(a, limits), b, limits);
  if (is_object(b)) return loose_equal(a, to_primitive(b, limits), limits);
  // One number, one string: compare numerically.
  double x = a.is_string() ? js_string_to_number(a.as_string()) : a.as_number();
  double y = b.is_string() ? js_string_to_number(b.as_string()) : b.as_number();
  return x == y;
}

int compare_for_sort(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_none() && b.is_none()) return 0;
  if (a.is_undefined() && b.is_undefined()) return 0;
  if (is_nullish(a) || is_nullish(b)) {
    fail(std::string("cannot compare ") + kind_name(a.kind()) + " with " + kind_name(b.kind()));
  }
  if (is_numeric_like(a) && is_numeric_like(b)) {
    double x = numeric_value(a), y = numeric_value(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.kind() != b.kind()) {
    fail(std::string("cannot compare different types: ") + kind_name(a.kind()) + " and " + kind_name(b.kind()));
  }
  if (!a.is_string()) fail(std::string("cannot compare values of type ") + kind_name(a.kind()));
  if (case_sensitive) return compare_utf16(a.as_string(), b.as_string());
  return compare_utf16(js_to_lower(a.as_string()), js_to_lower(b.as_string()));
}

void stable_sort_values(Value::List& items, const std::function<bool(const Value&, const Value&)>& less) {
  Value::List buffer(items.size());
  for (size_t width = 1; width < items.size(); width *= 2) {
    for (size_t lo = 0; lo < items.size(); lo += 2 * width) {
      size_t mid = std::min(lo + width, items.size()), hi = std::min(lo + 2 * width, items.size());
      size_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) buffer[k++] = less(items[j], items[i]) ? items[j++] : items[i++];
      while (i < mid) buffer[k++] = items[i++];
      while (j < hi) buffer[k++] = items[j++];
    }
    items.swap(buffer);
  }
}

}  // namespace beam::text::jinja
