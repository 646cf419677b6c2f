// Turning values into text the way the reference renderer does: printing (`{{ v }}`), the
// JavaScript toString used by `~`, `+` and join, and the tojson filter (json.dumps-like output).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>

#include "text/jinja/value.h"

namespace beam::text::jinja {

// Bounds for formatting, so cyclic or exploding structures fail instead of hanging.
struct FormatLimits {
  size_t max_bytes = 64u << 20;
  int max_depth = 512;
};

// How `{{ value }}` prints a value (callers skip undefined and none at the top level):
// floats keep ".0", booleans print "true"/"false", containers print as JSON.
std::string display_string(const Value& v, const FormatLimits& limits);

// JavaScript's toString of the underlying value: numbers without ".0", lists joined by ","
// (elements printed as display_string), dicts as "[object Map]".
std::string js_raw_string(const Value& v, const FormatLimits& limits);

struct JsonOptions {
  int indent = 0;  // 0: single line (the reference treats indent=0 like no indent)
  bool ensure_ascii = false;
  std::optional<std::pair<std::string, std::string>> separators;  // item, key
  bool sort_keys = false;
  bool undefined_as_null = true;  // false: print "undefined" (how containers display)
};

// The tojson filter: JSON.stringify quoting, ", " / ": " separators (or "," with indent).
std::string to_json(const Value& v, const JsonOptions& options, const FormatLimits& limits);

}  // namespace beam::text::jinja
