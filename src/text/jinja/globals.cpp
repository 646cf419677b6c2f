// Global constants and functions (see globals.h).
#include "text/jinja/globals.h"

#include <cmath>
#include <string>

#include "text/jinja/error.h"
#include "text/jinja/js_number.h"
#include "text/jinja/value_format.h"

namespace beam::text::jinja {
namespace {

// namespace(mapping_or_pairs?, **kwargs): a fresh mutable dict; the input is copied.
Value make_namespace(Runtime& rt, const CallArgs& args) {
  if (args.positional.size() > 1) {
    fail("namespace() takes at most 1 positional argument, got " + std::to_string(args.positional.size()));
  }
  Dict entries;
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is_dict()) {
      for (const auto& [key, value] : source.as_dict().items()) entries.set(key, value);
    } else if (source.is_list()) {
      for (const Value& pair : source.as_list()) {
        if (!pair.is_list() || pair.as_list().size() != 2) fail("namespace() expects a mapping or [key, value] pairs");
        if (!pair.as_list()[0].is_string()) fail("namespace() keys must be strings");
        entries.set(pair.as_list()[0].as_string(), pair.as_list()[1]);
      }
    } else {
      fail(std::string("namespace() cannot read entries from ") + kind_name(source.kind()));
    }
  }
  for (const auto& [key, value] : args.keyword) entries.set(key, value);
  return rt.make_namespace(std::move(entries));
}

// range([start,] stop[, step]) over JavaScript numbers; whole results are ints.
Value make_range(Runtime& rt, const CallArgs& args) {
  if (!args.keyword.empty()) fail("range() takes no keyword arguments");
  if (args.positional.empty() || args.positional.size() > 3) fail("range() takes 1 to 3 arguments");
  for (const Value& v : args.positional) {
    if (!v.is_number()) fail(std::string("range() arguments must be numbers, got ") + kind_name(v.kind()));
  }
  double start = 0, stop = 0, step = 1;
  if (args.positional.size() == 1) {
    stop = args.positional[0].as_number();
  } else {
    start = args.positional[0].as_number();
    stop = args.positional[1].as_number();
    if (args.positional.size() == 3) step = args.positional[2].as_number();
  }
  if (step == 0) fail("range() step must not be zero");
  Value::List items;
  for (double i = start; step > 0 ? i < stop : i > stop; i += step) {
    rt.check_list_size(items.size() + 1);
    items.push_back(Value::number(i));
  }
  return rt.make_list(std::move(items));
}

const char* const kMonthsLong[] = {"January", "February", "March",     "April",   "May",      "June",
                                   "July",    "August",   "September", "October", "November", "December"};
const char* const kMonthsShort[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

std::string two_digits(int v) { return (v < 10 ? "0" : "") + std::to_string(v); }

// The reference's strftime subset: %Y %m %d %b %B %H %M %% (local time, English month names);
// other directives are left as written.
Value strftime_now(Runtime& rt, const CallArgs& args) {
  if (args.positional.empty() || !args.positional[0].is_string()) fail("strftime_now() needs a format string");
  const std::string& format = args.positional[0].as_string();
  std::time_t now = rt.now();
  std::tm local{};
  localtime_r(&now, &local);
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out.push_back(format[i]);
      continue;
    }
    char d = format[i + 1];
    switch (d) {
      case 'Y': out += std::to_string(local.tm_year + 1900); break;
      case 'm': out += two_digits(local.tm_mon + 1); break;
      case 'd': out += two_digits(local.tm_mday); break;
      case 'b': out += kMonthsShort[local.tm_mon]; break;
      case 'B': out += kMonthsLong[local.tm_mon]; break;
      case 'H': out += two_digits(local.tm_hour); break;
      case 'M': out += two_digits(local.tm_min); break;
      case '%': out += '%'; break;
      default: out.push_back('%'); out.push_back(d); break;
    }
    ++i;
  }
  return rt.make_string(std::move(out));
}

}  // namespace

void install_globals(Scope& scope) {
  scope.set("true", Value::boolean(true));
  scope.set("false", Value::boolean(false));
  scope.set("none", Value::none());
  scope.set("True", Value::boolean(true));
  scope.set("False", Value::boolean(false));
  scope.set("None", Value::none());
  scope.set("namespace", Value::callable(Callable{Callable::Builtin{BuiltinFunction::kNamespace}}));
  scope.set("range", Value::callable(Callable{Callable::Builtin{BuiltinFunction::kRange}}));
  scope.set("raise_exception", Value::callable(Callable{Callable::Builtin{BuiltinFunction::kRaiseException}}));
  scope.set("strftime_now", Value::callable(Callable{Callable::Builtin{BuiltinFunction::kStrftimeNow}}));
}

Value call_builtin(Runtime& rt, BuiltinFunction fn, const CallArgs& args) {
  switch (fn) {
    case BuiltinFunction::kNamespace: return make_namespace(rt, args);
    case BuiltinFunction::kRange: return make_range(rt, args);
    case BuiltinFunction::kStrftimeNow: return strftime_now(rt, args);
    case BuiltinFunction::kRaiseException: {
      std::string message;
      if (!args.positional.empty() && !args.positional[0].is_undefined()) {
        message = js_raw_string(args.positional[0], rt.format_limits());
      }
      throw TemplateError{ErrorKind::kRaised, message, kNoOffset};
    }
  }
  return Value();
}

}  // namespace beam::text::jinja
