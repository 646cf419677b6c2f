// Filters (see filters.h). Each group mirrors a branch of the reference's applyFilter; the
// argument-less form (`x | f`) and the call form (`x | f(...)`) are separate there, so they are
// separate here, with the call form falling back to the bare form when given no arguments.
#include "text/jinja/filters.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "text/jinja/js_number.h"
#include "text/jinja/js_string.h"
#include "text/jinja/methods.h"
#include "text/jinja/is_tests.h"
#include "text/jinja/value_compare.h"
#include "text/jinja/value_format.h"

namespace beam::text::jinja {
namespace {

[[noreturn]] void unknown_filter(std::string_view name, const Value& operand) {
  fail("unknown filter '" + std::string(name) + "' for a " + kind_name(operand.kind()) + " value");
}

bool flag_value(const Value* v, std::string_view name, bool fallback) {
  if (!v) return fallback;
  if (!v->is(ValueKind::kBool)) fail(std::string(name) + " must be a boolean");
  return v->as_bool();
}

// Positional argument i or keyword `name`, a boolean.
bool flag(const CallArgs& args, size_t i, std::string_view name, bool fallback) {
  return flag_value(args.arg(i, name), name, fallback);
}

// `a.b.0` paths into dicts, namespaces and lists; undefined when any step is missing.
Value attribute_path(const Value& item, const std::string& path) {
  Value current = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (current.is_dict() || current.is(ValueKind::kNamespace)) {
      const Value* v = current.as_dict().find(part);
      current = v ? *v : Value();
    } else if (current.is_list()) {
      std::optional<double> index = js_parse_int(part);
      if (!index || *index < 0 || *index >= static_cast<double>(current.as_list().size())) return Value();
      current = current.as_list()[static_cast<size_t>(*index)];
    } else {
      return Value();
    }
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

Value tojson(Runtime& rt, const Value& operand, const CallArgs& args) {
  JsonOptions options;
  if (const Value* indent = args.keyword_arg("indent"); indent && !indent->is_none()) {
    if (!indent->is(ValueKind::kInt)) fail("tojson indent must be an integer");
    double n = indent->as_number();
    if (!(n >= 0 && n <= 1024)) fail("tojson indent must be between 0 and 1024");
    options.indent = static_cast<int>(n);
  }
  options.ensure_ascii = flag_value(args.keyword_arg("ensure_ascii"), "ensure_ascii", false);
  options.sort_keys = flag_value(args.keyword_arg("sort_keys"), "sort_keys", false);
  if (const Value* seps = args.keyword_arg("separators"); seps && !seps->is_none()) {
    if (!seps->is_list() || seps->as_list().size() != 2 || !seps->as_list()[0].is_string() ||
        !seps->as_list()[1].is_string()) {
      fail("tojson separators must be a pair of strings");
    }
    options.separators = std::make_pair(seps->as_list()[0].as_string(), seps->as_list()[1].as_string());
  }
  return rt.make_string(to_json(operand, options, rt.format_limits()));
}

Value default_filter(const Value& operand, const CallArgs& args) {
  Value fallback = args.positional.empty() ? Value::string("") : args.positional[0];
  bool boolean = flag(args, 1, "boolean", false);
  if (operand.is_undefined() || (boolean && !operand.truthy())) return fallback;
  return operand;
}

// How join stringifies an element (JavaScript Array.prototype.join).
std::string join_piece(const Value& v, const FormatLimits& limits) {
  return v.is_undefined() || v.is_none() ? std::string() : js_raw_string(v, limits);
}

Value join(Runtime& rt, const Value& operand, const std::string& separator) {
  std::string out;
  size_t max_bytes = rt.limits().max_output_bytes;
  if (operand.is_string()) {
    std::vector<size_t> bounds = code_point_offsets(operand.as_string());
    for (size_t i = 0; i + 1 < bounds.size(); ++i) {
      if (i > 0) out += separator;
      out.append(operand.as_string(), bounds[i], bounds[i + 1] - bounds[i]);
      if (out.size() > max_bytes) fail_limit("join() result exceeds " + std::to_string(max_bytes) + " bytes");
    }
  } else {
    const auto& items = operand.as_list();
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += separator;
      out += join_piece(items[i], rt.format_limits());
      if (out.size() > max_bytes) fail_limit("join() result exceeds " + std::to_string(max_bytes) + " bytes");
    }
  }
  return rt.make_string(std::move(out));
}

// `int` / `float` with parentheses: strings parse (else the default), numbers pass unchanged.
Value number_call(const Value& operand, std::string_view name, const CallArgs& args) {
  bool to_int = name == "int";
  const Value* given = args.arg(0, "default");
  Value fallback = given ? *given : (to_int ? Value::integer(0) : Value::floating(0));
  if (operand.is_string()) {
    auto parsed = to_int ? js_parse_int(operand.as_string()) : js_parse_float(operand.as_string());
    if (!parsed) return fallback;
    return to_int ? Value::integer(*parsed) : Value::floating(*parsed);
  }
  if (operand.is_number()) return operand;
  if (operand.is(ValueKind::kBool)) {
    double v = operand.as_bool() ? 1 : 0;
    return to_int ? Value::integer(v) : Value::floating(v);
  }
  fail("cannot apply filter '" + std::string(name) + "' to a " + kind_name(operand.kind()) + " value");
}

std::string indent_lines(Runtime& rt, const std::string& s, size_t width, bool first, bool blank) {
  std::string pad(width, ' ');
  std::string out;
  size_t start = 0;
  for (size_t line = 0;; ++line) {
    size_t nl = s.find('\n', start);
    std::string_view text(s.data() + start, (nl == std::string::npos ? s.size() : nl) - start);
    if (line > 0) out.push_back('\n');
    bool skip = (!first && line == 0) || (!blank && text.empty());
    if (!skip) out += pad;
    out += text;
    if (out.size() > rt.limits().max_output_bytes) fail_limit("indent() result is too large");
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
}

Value sort_list(Runtime& rt, const Value::List& items, const CallArgs& args) {
  bool reverse = flag(args, 0, "reverse", false);
  bool case_sensitive = flag(args, 1, "case_sensitive", false);
  const Value* attribute = args.arg(2, "attribute");
  std::string path;
  bool by_attribute = attribute && !attribute->is_none();
  if (by_attribute) {
    if (attribute->is_string()) {
      path = attribute->as_string();
    } else if (attribute->is(ValueKind::kInt)) {
      path = js_number_to_string(attribute->as_number());
    } else {
      fail("sort attribute must be a string, an integer or none");
    }
  }
  Value::List sorted = items;
  stable_sort_values(sorted, [&](const Value& a, const Value& b) {
    Value ka = by_attribute ? attribute_path(a, path) : a;
    Value kb = by_attribute ? attribute_path(b, path) : b;
    int c = compare_for_sort(ka, kb, case_sensitive);
    return reverse ? c > 0 : c < 0;
  });
  rt.step(items.size());
  return rt.make_list(std::move(sorted));
}

// selectattr / rejectattr(attribute, test?, value?) over a list of dicts.
Value select_by_attribute(Runtime& rt, const Value::List& items, const CallArgs& args, bool select) {
  const char* name = select ? "selectattr" : "rejectattr";
  for (const Value& item : items) {
    if (!item.is_dict() && !item.is(ValueKind::kNamespace)) fail(std::string(name) + " can only filter a list of dicts");
  }
  if (args.positional.empty()) fail(std::string(name) + " needs an attribute name");
  for (const Value& arg : args.positional) {
    if (!arg.is_string()) fail(std::string("arguments of ") + name + " must be strings");
  }
  const std::string& attribute = args.positional[0].as_string();
  CallArgs test_args;
  if (args.positional.size() > 2) test_args.positional.push_back(args.positional[2]);
  Value::List kept;
  for (const Value& item : items) {
    const Value* a = item.as_dict().find(attribute);
    bool result = false;
    if (a) result = args.positional.size() > 1 ? apply_test(rt, args.positional[1].as_string(), *a, test_args) : a->truthy();
    if (result == select) kept.push_back(item);
  }
  return rt.make_list(std::move(kept));
}

// map(attribute='a.b', default=x), or (as in Python Jinja) map('filter', args...).
Value map_list(Runtime& rt, const Value::List& items, const CallArgs& args) {
  Value::List mapped;
  mapped.reserve(items.size());
  if (const Value* attribute = args.keyword_arg("attribute")) {
    if (!attribute->is_string()) fail("map attribute must be a string");
    const Value* fallback = args.keyword_arg("default");
    for (const Value& item : items) {
      if (!item.is_dict() && !item.is(ValueKind::kNamespace)) fail("map(attribute=...) needs a list of dicts");
      Value v = attribute_path(item, attribute->as_string());
      mapped.push_back(v.is_undefined() && fallback ? *fallback : v);
    }
    return rt.make_list(std::move(mapped));
  }
  if (args.positional.empty() || !args.positional[0].is_string()) fail("map needs attribute=... or a filter name");
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  std::string filter = args.positional[0].as_string();
  bool has_call = !rest.positional.empty() || !rest.keyword.empty();
  for (const Value& item : items) mapped.push_back(apply_filter(rt, item, filter, rest, has_call));
  return rt.make_list(std::move(mapped));
}

Value unique(Runtime& rt, const Value::List& items) {
  Value::List out;
  for (const Value& item : items) {
    bool seen = false;
    for (const Value& kept : out) seen = seen || same_value_zero(kept, item);
    if (!seen) out.push_back(item);
    rt.step(out.size());
  }
  return rt.make_list(std::move(out));
}

// Python's round(value, precision) ('common'), or ceil / floor at that precision.
Value round_number(const Value& operand, const CallArgs& args) {
  const Value* precision_arg = args.arg(0, "precision");
  const Value* method_arg = args.arg(1, "method");
  double precision = precision_arg ? (precision_arg->is(ValueKind::kInt) ? precision_arg->as_number() : NAN) : 0;
  if (std::isnan(precision) || std::fabs(precision) > 300) fail("round precision must be an integer");
  std::string method = method_arg && method_arg->is_string() ? method_arg->as_string() : "common";
  double v = operand.as_number(), scale = std::pow(10.0, precision);
  if (method == "ceil") return Value::floating(std::ceil(v * scale) / scale);
  if (method == "floor") return Value::floating(std::floor(v * scale) / scale);
  if (method != "common") fail("round method must be 'common', 'ceil' or 'floor'");
  if (operand.is(ValueKind::kInt) && precision >= 0) return operand;
  if (precision <= 0) return Value::floating(std::nearbyint(v / (1 / scale)) * (1 / scale));
  char buf[400];
  std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), v);  // correctly rounded, ties to even
  return Value::floating(std::strtod(buf, nullptr));
}

Value list_filter(Runtime& rt, const Value& operand, std::string_view name) {
  const auto& items = operand.as_list();
  if (name == "list") return operand;
  if (name == "first") return items.empty() ? Value() : items.front();
  if (name == "last") return items.empty() ? Value() : items.back();
  if (name == "length") return Value::integer(static_cast<double>(items.size()));
  if (name == "reverse") return rt.make_list(Value::List(items.rbegin(), items.rend()));
  if (name == "sort") return sort_list(rt, items, CallArgs{});
  if (name == "join") return join(rt, operand, "");
  if (name == "string") return rt.make_string(display_string(operand, rt.format_limits()));
  if (name == "unique") return unique(rt, items);
  unknown_filter(name, operand);
}

Value string_filter(Runtime& rt, const Value& operand, std::string_view name) {
  const std::string& s = operand.as_string();
  if (name == "length") return Value::integer(static_cast<double>(utf16_length(s)));
  if (name == "upper") return rt.make_string(js_to_upper(s));
  if (name == "lower") return rt.make_string(js_to_lower(s));
  if (name == "title") return rt.make_string(js_title_case(s));
  if (name == "capitalize") return rt.make_string(js_capitalize(s));
  if (name == "trim") return rt.make_string(std::string(js_trim(s)));
  if (name == "indent") return rt.make_string(indent_lines(rt, s, 4, false, false));
  if (name == "join" || name == "string") return operand;
  if (name == "int") return Value::integer(js_parse_int(s).value_or(0));
  if (name == "float") return Value::floating(js_parse_float(s).value_or(0));
  unknown_filter(name, operand);
}

Value number_filter(Runtime& rt, const Value& operand, std::string_view name) {
  double v = operand.as_number();
  if (name == "abs") return operand.is(ValueKind::kInt) ? Value::integer(std::fabs(v)) : Value::floating(std::fabs(v));
  if (name == "int") return Value::integer(std::floor(v));
  if (name == "float") return Value::floating(v);
  if (name == "string") return rt.make_string(display_string(operand, rt.format_limits()));
  if (name == "round") return round_number(operand, CallArgs{});
  unknown_filter(name, operand);
}

Value dict_filter(Runtime& rt, const Value& operand, std::string_view name, const CallArgs& args) {
  if (name == "items") return dict_items(rt, operand.as_dict());
  if (name == "length") return Value::integer(static_cast<double>(operand.as_dict().size()));
  if (name == "string") return rt.make_string(display_string(operand, rt.format_limits()));
  std::optional<Value> method = builtin_attribute(operand, name);
  if (!method) unknown_filter(name, operand);
  return call_method(rt, std::get<Callable::BoundMethod>(method->as_callable().target).method, operand, args);
}

Value bool_filter(Runtime& rt, const Value& operand, std::string_view name) {
  double v = operand.as_bool() ? 1 : 0;
  if (name == "bool") return operand;
  if (name == "int") return Value::integer(v);
  if (name == "float") return Value::floating(v);
  if (name == "string") return rt.make_string(operand.as_bool() ? "true" : "false");
  unknown_filter(name, operand);
}

// `x | name` without parentheses.
Value bare_filter(Runtime& rt, const Value& operand, std::string_view name) {
  switch (operand.kind()) {
    case ValueKind::kList: return list_filter(rt, operand, name);
    case ValueKind::kString: return string_filter(rt, operand, name);
    case ValueKind::kInt: case ValueKind::kFloat: return number_filter(rt, operand, name);
    case ValueKind::kDict: return dict_filter(rt, operand, name, CallArgs{});
    case ValueKind::kBool: return bool_filter(rt, operand, name);
    case ValueKind::kUndefined: case ValueKind::kNone: case ValueKind::kNamespace: case ValueKind::kCallable:
      break;
  }
  fail("cannot apply filter '" + std::string(name) + "' to a " + kind_name(operand.kind()) + " value");
}

// `x | name(args)`; nullopt when this form has no such filter for the operand.
std::optional<Value> call_filter(Runtime& rt, const Value& operand, std::string_view name, const CallArgs& args) {
  if (operand.is_list()) {
    const auto& items = operand.as_list();
    if (name == "sort") return sort_list(rt, items, args);
    if (name == "selectattr" || name == "rejectattr") return select_by_attribute(rt, items, args, name == "selectattr");
    if (name == "map") return map_list(rt, items, args);
  } else if (operand.is_string()) {
    if (name == "indent") {
      const Value* width = args.arg(0, "width");
      if (width && (!width->is(ValueKind::kInt) || !(width->as_number() >= 0))) {
        fail("indent width must be a non-negative integer");
      }
      double w = width ? width->as_number() : 4;
      if (w > static_cast<double>(rt.limits().max_output_bytes)) fail_limit("indent width is too large");
      const Value* first = args.arg(1, "first");
      const Value* blank = args.arg(2, "blank");
      return rt.make_string(indent_lines(rt, operand.as_string(), static_cast<size_t>(w), first && first->truthy(),
                                         blank && blank->truthy()));
    }
    if (name == "replace") return call_method(rt, Method::kReplace, operand, args);
  } else if (operand.is_dict()) {
    if (builtin_attribute(operand, name)) return dict_filter(rt, operand, name, args);
  } else if (operand.is_number() && name == "round") {
    return round_number(operand, args);
  }
  return std::nullopt;
}

}  // namespace

Value apply_filter(Runtime& rt, const Value& operand, std::string_view name, const CallArgs& args, bool has_call) {
  rt.step();
  if (name == "safe") return operand;
  if (name == "tojson") return tojson(rt, operand, args);
  if (name == "default" || name == "d") return default_filter(operand, args);
  if (has_call && name == "join") {
    if (!operand.is_string() && !operand.is_list()) {
      fail(std::string("cannot apply filter 'join' to a ") + kind_name(operand.kind()) + " value");
    }
    const Value* separator = args.arg(0, "separator");
    if (separator && !separator->is_string()) fail("join separator must be a string");
    return join(rt, operand, separator ? separator->as_string() : "");
  }
  if (has_call && (name == "int" || name == "float")) return number_call(operand, name, args);
  if (has_call) {
    if (std::optional<Value> result = call_filter(rt, operand, name, args)) return *result;
    if (!args.positional.empty() || !args.keyword.empty()) unknown_filter(name, operand);
  }
  return bare_filter(rt, operand, name);
}

}  // namespace beam::text::jinja
