// Printing, JavaScript toString and JSON serialisation of values (see value_format.h).
#include "text/jinja/value_format.h"

#include <algorithm>
#include <cmath>

#include "text/jinja/error.h"
#include "text/jinja/js_number.h"
#include "text/jinja/js_string.h"
#include "text/utf8.h"

namespace beam::text::jinja {
namespace {

void check_size(const std::string& out, const FormatLimits& limits) {
  if (out.size() > limits.max_bytes) {
    fail_limit("formatted value exceeds " + std::to_string(limits.max_bytes) + " bytes");
  }
}

void check_depth(int depth, const FormatLimits& limits) {
  if (depth > limits.max_depth) fail_limit("value nested deeper than " + std::to_string(limits.max_depth) + " levels (cyclic?)");
}

void append_hex4(std::string& out, uint32_t unit) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out.push_back(kHex[(unit >> shift) & 0xF]);
}

// JSON.stringify of a string, then (ensure_ascii) every UTF-16 unit in [0x7F, 0xFFFF] as \uXXXX.
void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  size_t pos = 0;
  while (pos < s.size()) {
    char32_t cp = decode_utf8(s, pos);
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      default: break;
    }
    if (cp < 0x20) {
      append_hex4(out, cp);
    } else if (ensure_ascii && cp >= 0x7F) {
      if (cp >= 0x10000) {
        append_hex4(out, 0xD800 + ((cp - 0x10000) >> 10));
        append_hex4(out, 0xDC00 + ((cp - 0x10000) & 0x3FF));
      } else {
        append_hex4(out, cp);
      }
    } else if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else {
      append_utf8(out, cp);  // re-encoding also turns invalid bytes into U+FFFD, like a decoder
    }
  }
  out.push_back('"');
}

// Approximates String.prototype.localeCompare for sort_keys: case-insensitive first, lowercase
// before uppercase on ties.
bool locale_less(const std::string& a, const std::string& b) {
  int c = compare_utf16(js_to_lower(a), js_to_lower(b));
  if (c != 0) return c < 0;
  return compare_utf16(a, b) > 0;
}

class JsonWriter {
 public:
  JsonWriter(const JsonOptions& options, const FormatLimits& limits) : options_(options), limits_(limits) {
    if (options.separators) {
      item_sep_ = options.separators->first;
      key_sep_ = options.separators->second;
    } else {
      item_sep_ = options.indent > 0 ? "," : ", ";
      key_sep_ = ": ";
    }
    if (options.indent > 0) indent_.assign(static_cast<size_t>(options.indent), ' ');
  }

  void write(const Value& v, int depth) {
    check_depth(depth, limits_);
    switch (v.kind()) {
      case ValueKind::kUndefined: out_ += options_.undefined_as_null ? "null" : "undefined"; break;
      case ValueKind::kNone: out_ += "null"; break;
      case ValueKind::kBool: out_ += v.as_bool() ? "true" : "false"; break;
      case ValueKind::kInt: case ValueKind::kFloat: {
        double d = v.as_number();
        out_ += std::isfinite(d) ? js_number_to_string(d) : "null";
        break;
      }
      case ValueKind::kString: append_json_string(out_, v.as_string(), options_.ensure_ascii); break;
      case ValueKind::kList: write_list(v.as_list(), depth); break;
      case ValueKind::kDict: case ValueKind::kNamespace: write_dict(v.as_dict(), depth); break;
      case ValueKind::kCallable: fail("cannot convert a callable to JSON");
    }
    check_size(out_, limits_);
  }

  std::string take() { return std::move(out_); }

 private:
  std::string padding(int depth) const {
    std::string pad = "\n";
    for (int i = 0; i < depth; ++i) pad += indent_;
    return pad;
  }

  void write_list(const Value::List& items, int depth) {
    bool pretty = !indent_.empty() && !items.empty();
    std::string child_pad = pretty ? padding(depth + 1) : "";
    out_.push_back('[');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out_ += item_sep_;
      out_ += child_pad;
      write(items[i], depth + 1);
    }
    if (pretty) out_ += padding(depth);
    out_.push_back(']');
  }

  void write_dict(const Dict& dict, int depth) {
    std::vector<const Dict::Item*> entries;
    entries.reserve(dict.size());
    for (const auto& item : dict.items()) entries.push_back(&item);
    if (options_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const Dict::Item* a, const Dict::Item* b) { return locale_less(a->first, b->first); });
    }
    bool pretty = !indent_.empty() && !entries.empty();
    std::string child_pad = pretty ? padding(depth + 1) : "";
    out_.push_back('{');
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) out_ += item_sep_;
      out_ += child_pad;
      append_json_string(out_, entries[i]->first, options_.ensure_ascii);
      out_ += key_sep_;
      write(entries[i]->second, depth + 1);
    }
    if (pretty) out_ += padding(depth);
    out_.push_back('}');
  }

  const JsonOptions& options_;
  const FormatLimits& limits_;
  std::string item_sep_, key_sep_, indent_;
  std::string out_;
};

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options, const FormatLimits& limits) {
  JsonWriter writer(options, limits);
  writer.write(v, 0);
  return writer.take();
}

std::string display_string(const Value& v, const FormatLimits& limits) {
  switch (v.kind()) {
    case ValueKind::kUndefined: return "undefined";
    case ValueKind::kNone: return "null";
    case ValueKind::kBool: return v.as_bool() ? "true" : "false";
    case ValueKind::kInt: return js_number_to_string(v.as_number());
    case ValueKind::kFloat: return js_float_display(v.as_number());
    case ValueKind::kString: return v.as_string();
    case ValueKind::kList: case ValueKind::kDict: case ValueKind::kNamespace: {
      JsonOptions options;
      options.undefined_as_null = false;
      return to_json(v, options, limits);
    }
    case ValueKind::kCallable: fail("cannot print a callable");
  }
  return std::string();
}

std::string js_raw_string(const Value& v, const FormatLimits& limits) {
  switch (v.kind()) {
    case ValueKind::kInt: case ValueKind::kFloat: return js_number_to_string(v.as_number());
    case ValueKind::kDict: case ValueKind::kNamespace: return "[object Map]";
    case ValueKind::kList: {
      std::string out;
      const auto& items = v.as_list();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out.push_back(',');
        out += display_string(items[i], limits);
        check_size(out, limits);
      }
      return out;
    }
    case ValueKind::kUndefined: case ValueKind::kNone: case ValueKind::kBool: case ValueKind::kString:
    case ValueKind::kCallable:
      return display_string(v, limits);
  }
  return std::string();
}

}  // namespace beam::text::jinja
