// JSON body parsing and typed field reads (see json_fields.h).
#include "server/api/json_fields.h"

#include <cmath>
#include <limits>

#include "server/parsers/bounded_json.h"

namespace beam::server {

ApiExpected<Json> parse_json_body(std::string_view body) {
  if (body.empty()) return invalid_request("the request body is empty; expected a JSON object");
  Expected<Json> parsed = parse_bounded_json(body);
  if (!parsed.ok())
    return invalid_request("the request body is " + parsed.error().message, "", "invalid_json");
  return std::move(parsed).value();
}

ApiExpected<Json> parse_optional_json_object(std::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return Json::object();
  ApiExpected<Json> parsed = parse_json_body(body);
  if (parsed.ok() && !parsed->is_object())
    return invalid_request(std::string("the request body is a JSON ") + json_type_name(*parsed) +
                           "; expected an object");
  return parsed;
}

const char* json_type_name(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::object: return "object";
    case Json::value_t::array: return "array";
    case Json::value_t::string: return "string";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: return "number";
    case Json::value_t::binary: return "binary";
    case Json::value_t::discarded: return "invalid";
  }
  return "invalid";
}

std::string dump_json(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string indexed_path(const std::string& path, size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

FieldReader::FieldReader(const Json& value, std::string path) : value_(value), path_(std::move(path)) {}

const Json* FieldReader::get(std::string_view key) const {
  if (!value_.is_object()) return nullptr;
  auto it = value_.find(std::string(key));
  if (it == value_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string FieldReader::path(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

void FieldReader::fail(std::string_view key, std::string message) {
  if (error_) return;
  const std::string p = path(key);
  error_ = invalid_request("'" + p + "': " + message, p);
}

void FieldReader::fail_type(std::string_view key, const char* expected, const Json& got) {
  fail(key, std::string("expected ") + expected + ", got " + json_type_name(got));
}

void FieldReader::read(std::string_view key, std::string* out) {
  std::optional<std::string> v;
  read(key, &v);
  if (v) *out = std::move(*v);
}

void FieldReader::read(std::string_view key, std::optional<std::string>* out) {
  const Json* v = get(key);
  if (!v) return;
  if (!v->is_string()) return fail_type(key, "a string", *v);
  *out = v->get<std::string>();
}

void FieldReader::read(std::string_view key, double* out) {
  std::optional<double> v;
  read(key, &v);
  if (v) *out = *v;
}

void FieldReader::read(std::string_view key, std::optional<double>* out) {
  const Json* v = get(key);
  if (!v) return;
  if (!v->is_number()) return fail_type(key, "a number", *v);
  *out = v->get<double>();
}

void FieldReader::read(std::string_view key, int64_t* out) {
  std::optional<int64_t> v;
  read(key, &v);
  if (v) *out = *v;
}

void FieldReader::read(std::string_view key, std::optional<int64_t>* out) {
  const Json* v = get(key);
  if (!v) return;
  if (v->is_number_integer()) {
    *out = v->get<int64_t>();
    return;
  }
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return fail(key, "integer " + std::to_string(u) + " is too large");
    *out = static_cast<int64_t>(u);
    return;
  }
  if (v->is_number_float()) {
    const double d = v->get<double>();
    // 16.0 is accepted as 16 (JavaScript clients cannot tell the two apart); 16.5 is not.
    if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.0e15) {
      *out = static_cast<int64_t>(d);
      return;
    }
    return fail(key, "expected an integer, got " + v->dump());
  }
  fail_type(key, "an integer", *v);
}

void FieldReader::read(std::string_view key, bool* out) {
  const Json* v = get(key);
  if (!v) return;
  if (!v->is_boolean()) return fail_type(key, "a boolean", *v);
  *out = v->get<bool>();
}

void FieldReader::require(std::string_view key, std::string* out) {
  if (!get(key)) return fail(key, "is required");
  read(key, out);
}

}  // namespace beam::server
