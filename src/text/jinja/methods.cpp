// String, list and dict methods (see methods.h).
#include "text/jinja/methods.h"

#include <cmath>
#include <limits>

#include "text/jinja/js_string.h"
#include "text/jinja/value_compare.h"

namespace beam::text::jinja {
namespace {

struct MethodName {
  std::string_view name;
  Method method;
};

constexpr MethodName kStringMethods[] = {
    {"upper", Method::kUpper},   {"lower", Method::kLower},           {"strip", Method::kStrip},
    {"title", Method::kTitle},   {"capitalize", Method::kCapitalize}, {"rstrip", Method::kRstrip},
    {"lstrip", Method::kLstrip}, {"startswith", Method::kStartswith}, {"endswith", Method::kEndswith},
    {"split", Method::kSplit},   {"replace", Method::kReplace},
};

constexpr MethodName kDictMethods[] = {
    {"get", Method::kGet},       {"items", Method::kItems},         {"keys", Method::kKeys},
    {"values", Method::kValues}, {"dictsort", Method::kDictsort},
};

template <size_t N>
std::optional<Value> bind(const MethodName (&table)[N], const Value& receiver, std::string_view name) {
  for (const auto& entry : table) {
    if (entry.name == name) return Value::callable(Callable{Callable::BoundMethod{entry.method, receiver}});
  }
  return std::nullopt;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// startswith / endswith: a string or a list (tuple) of strings.
Value affix_test(const std::string& s, const CallArgs& args, bool prefix) {
  const char* name = prefix ? "startswith()" : "endswith()";
  if (args.positional.empty()) fail(std::string(name) + " requires at least one argument");
  const Value& pattern = args.positional[0];
  auto matches = [&](const std::string& p) { return prefix ? starts_with(s, p) : ends_with(s, p); };
  if (pattern.is_string()) return Value::boolean(matches(pattern.as_string()));
  if (!pattern.is_list()) fail(std::string(name) + " argument must be a string or a tuple of strings");
  for (const Value& item : pattern.as_list()) {
    if (!item.is_string()) fail(std::string(name) + " tuple elements must be strings");
    if (matches(item.as_string())) return Value::boolean(true);
  }
  return Value::boolean(false);
}

Value replace_method(Runtime& rt, const std::string& s, const CallArgs& args) {
  if (args.positional.size() < 2) fail("replace() requires at least two arguments");
  const Value& from = args.positional[0];
  const Value& to = args.positional[1];
  if (!from.is_string() || !to.is_string()) fail("replace() arguments must be strings");
  const Value* count = args.arg(2, "count");
  double n = -1;
  if (count && !count->is_none()) {
    if (!count->is(ValueKind::kInt)) fail("replace() count argument must be an integer or none");
    n = count->as_number();
  }
  return rt.make_string(replace_string(rt, s, from.as_string(), to.as_string(), n));
}

bool flag_arg(const CallArgs& args, size_t i, std::string_view name, bool fallback) {
  const Value* v = args.arg(i, name);
  if (!v) return fallback;
  if (!v->is(ValueKind::kBool)) fail(std::string(name) + " must be a boolean");
  return v->as_bool();
}

// dict.dictsort(case_sensitive=false, by='key', reverse=false) → sorted [key, value] pairs.
Value dictsort(Runtime& rt, const Dict& dict, const CallArgs& args) {
  bool case_sensitive = flag_arg(args, 0, "case_sensitive", false);
  const Value* by = args.arg(1, "by");
  std::string by_key = "key";
  if (by) {
    if (!by->is_string()) fail("by must be a string");
    by_key = by->as_string();
    if (by_key != "key" && by_key != "value") fail("by must be either 'key' or 'value'");
  }
  bool reverse = flag_arg(args, 2, "reverse", false);
  Value::List pairs = dict_items(rt, dict).as_list();
  size_t index = by_key == "key" ? 0 : 1;
  stable_sort_values(pairs, [&](const Value& a, const Value& b) {
    int c = compare_for_sort(a.as_list()[index], b.as_list()[index], case_sensitive);
    return reverse ? c > 0 : c < 0;
  });
  return rt.make_list(std::move(pairs));
}

Value string_method(Runtime& rt, Method method, const std::string& s, const CallArgs& args) {
  switch (method) {
    case Method::kUpper: return rt.make_string(js_to_upper(s));
    case Method::kLower: return rt.make_string(js_to_lower(s));
    case Method::kStrip: return rt.make_string(std::string(js_trim(s)));
    case Method::kLstrip: return rt.make_string(std::string(js_trim_start(s)));
    case Method::kRstrip: return rt.make_string(std::string(js_trim_end(s)));
    case Method::kTitle: return rt.make_string(js_title_case(s));
    case Method::kCapitalize: return rt.make_string(js_capitalize(s));
    case Method::kStartswith: return affix_test(s, args, true);
    case Method::kEndswith: return affix_test(s, args, false);
    case Method::kSplit: {
      Value sep = args.positional.size() > 0 ? args.positional[0] : Value::none();
      Value maxsplit = args.positional.size() > 1 ? args.positional[1] : Value::integer(-1);
      return split_string(rt, s, sep, maxsplit);
    }
    case Method::kReplace: return replace_method(rt, s, args);
    case Method::kGet: case Method::kItems: case Method::kKeys: case Method::kValues: case Method::kDictsort:
      break;
  }
  fail("not a string method");
}

Value dict_method(Runtime& rt, Method method, const Dict& dict, const CallArgs& args) {
  switch (method) {
    case Method::kGet: {
      if (args.positional.empty() || !args.positional[0].is_string()) fail("dict.get() key must be a string");
      if (const Value* v = dict.find(args.positional[0].as_string())) return *v;
      return args.positional.size() > 1 ? args.positional[1] : Value::none();
    }
    case Method::kItems: return dict_items(rt, dict);
    case Method::kKeys: {
      Value::List keys;
      for (const auto& item : dict.items()) keys.push_back(Value::string(item.first));
      return rt.make_list(std::move(keys));
    }
    case Method::kValues: {
      Value::List values;
      for (const auto& item : dict.items()) values.push_back(item.second);
      return rt.make_list(std::move(values));
    }
    case Method::kDictsort: return dictsort(rt, dict, args);
    case Method::kUpper: case Method::kLower: case Method::kStrip: case Method::kTitle: case Method::kCapitalize:
    case Method::kRstrip: case Method::kLstrip: case Method::kStartswith: case Method::kEndswith:
    case Method::kSplit: case Method::kReplace:
      break;
  }
  fail("not a dict method");
}

}  // namespace

std::optional<Value> builtin_attribute(const Value& receiver, std::string_view name) {
  switch (receiver.kind()) {
    case ValueKind::kString:
      if (name == "length") return Value::integer(static_cast<double>(utf16_length(receiver.as_string())));
      return bind(kStringMethods, receiver, name);
    case ValueKind::kList:
      if (name == "length") return Value::integer(static_cast<double>(receiver.as_list().size()));
      return std::nullopt;
    case ValueKind::kDict: return bind(kDictMethods, receiver, name);
    case ValueKind::kUndefined: case ValueKind::kNone: case ValueKind::kBool: case ValueKind::kInt:
    case ValueKind::kFloat: case ValueKind::kNamespace: case ValueKind::kCallable:
      return std::nullopt;
  }
  return std::nullopt;
}

Value call_method(Runtime& rt, Method method, const Value& receiver, const CallArgs& args) {
  if (receiver.is_string()) return string_method(rt, method, receiver.as_string(), args);
  return dict_method(rt, method, receiver.as_dict(), args);
}

Value dict_items(Runtime& rt, const Dict& dict) {
  Value::List pairs;
  pairs.reserve(dict.size());
  for (const auto& [key, value] : dict.items()) pairs.push_back(Value::list({Value::string(key), value}));
  return rt.make_list(std::move(pairs));
}

Value split_string(Runtime& rt, const std::string& s, const Value& sep, const Value& maxsplit) {
  if (!sep.is_string() && !sep.is_none()) fail("split() separator must be a string or none");
  if (!maxsplit.is(ValueKind::kInt)) fail("split() maxsplit must be an integer");
  double limit = maxsplit.as_number();
  Value::List parts;
  if (sep.is_none()) {
    // Runs of whitespace separate; no empty strings; with maxsplit the rest stays whole.
    std::string_view text = js_trim_start(s);
    size_t pos = 0;
    while (pos < text.size()) {
      size_t start = pos;
      while (pos < text.size() && js_space_length_at(text, pos) == 0) ++pos;
      if (limit != -1 && static_cast<double>(parts.size()) >= limit) {
        parts.push_back(Value::string(std::string(text.substr(start))));
        break;
      }
      parts.push_back(Value::string(std::string(text.substr(start, pos - start))));
      while (size_t n = js_space_length_at(text, pos)) pos += n;
    }
    return rt.make_list(std::move(parts));
  }
  const std::string& separator = sep.as_string();
  if (separator.empty()) fail("split() separator must not be empty");
  std::vector<std::string> pieces;
  size_t start = 0;
  while (true) {
    size_t at = s.find(separator, start);
    if (at == std::string::npos) break;
    pieces.push_back(s.substr(start, at - start));
    start = at + separator.size();
    rt.check_list_size(pieces.size());
  }
  pieces.push_back(s.substr(start));
  if (limit != -1 && static_cast<double>(pieces.size()) > limit) {
    // JavaScript splice(limit): a negative limit counts from the end.
    double keep_d = limit < 0 ? std::max(0.0, static_cast<double>(pieces.size()) + limit) : limit;
    size_t keep = std::isnan(keep_d) ? 0 : static_cast<size_t>(keep_d);
    std::string rest;
    for (size_t i = keep; i < pieces.size(); ++i) rest += (i > keep ? separator : "") + pieces[i];
    pieces.resize(keep);
    pieces.push_back(std::move(rest));
  }
  for (auto& piece : pieces) parts.push_back(Value::string(std::move(piece)));
  return rt.make_list(std::move(parts));
}

std::string replace_string(Runtime& rt, const std::string& s, const std::string& from, const std::string& to,
                           double count) {
  double remaining = count < 0 ? std::numeric_limits<double>::infinity() : (std::isnan(count) ? 0 : count);
  if (remaining == 0) return s;
  size_t max_bytes = rt.limits().max_output_bytes;
  std::string out;
  if (from.empty()) {
    // Matches at every code point boundary, the start and the end included.
    std::vector<size_t> bounds = code_point_offsets(s);
    for (size_t i = 0; i < bounds.size(); ++i) {
      if (remaining > 0) {
        out += to;
        --remaining;
      }
      if (i + 1 < bounds.size()) out.append(s, bounds[i], bounds[i + 1] - bounds[i]);
      if (out.size() > max_bytes) fail_limit("replace() result exceeds " + std::to_string(max_bytes) + " bytes");
    }
    return out;
  }
  size_t start = 0;
  while (remaining > 0) {
    size_t at = s.find(from, start);
    if (at == std::string::npos) break;
    out.append(s, start, at - start);
    out += to;
    start = at + from.size();
    --remaining;
    if (out.size() > max_bytes) fail_limit("replace() result exceeds " + std::to_string(max_bytes) + " bytes");
  }
  out.append(s, start, std::string::npos);
  return out;
}

}  // namespace beam::text::jinja
