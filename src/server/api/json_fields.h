// Request JSON → typed fields. parse_json_body turns malformed JSON into a 400; FieldReader reads
// the fields of one object with the first type error remembered (sticky), each error naming the
// field's path ("messages[2].content") and what was expected.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/api/api_error.h"

namespace beam::server {

using Json = nlohmann::ordered_json;

// The body parsed as one JSON value (objects keep key order); errors say where parsing failed.
ApiExpected<Json> parse_json_body(std::string_view body);
// The body of a request whose fields are all optional: an empty object when it is blank, else
// parse_json_body's value, which must be an object.
ApiExpected<Json> parse_optional_json_object(std::string_view body);

// "string", "number", "object", ... as error messages name JSON types.
const char* json_type_name(const Json& value);

// Serialises with invalid UTF-8 replaced (model output may hold any bytes); never throws.
std::string dump_json(const Json& value);

// Reads fields of one object. Absent and null fields leave the output untouched. After the reads,
// failed() / error() report the first problem.
class FieldReader {
 public:
  // `path` prefixes field names in errors ("" for the request body itself).
  FieldReader(const Json& value, std::string path);

  bool failed() const { return error_.has_value(); }
  const ApiError& error() const { return *error_; }
  ApiError take_error() { return std::move(*error_); }

  // The field, or nullptr when absent or null (or when this value is not an object).
  const Json* get(std::string_view key) const;
  bool has(std::string_view key) const { return get(key) != nullptr; }
  std::string path(std::string_view key) const;

  void read(std::string_view key, std::string* out);
  void read(std::string_view key, std::optional<std::string>* out);
  void read(std::string_view key, double* out);
  void read(std::string_view key, std::optional<double>* out);
  void read(std::string_view key, int64_t* out);
  void read(std::string_view key, std::optional<int64_t>* out);
  void read(std::string_view key, bool* out);
  // Required string field: error when absent.
  void require(std::string_view key, std::string* out);

  // Records an error about `key` (kept only if it is the first).
  void fail(std::string_view key, std::string message);
  void fail_type(std::string_view key, const char* expected, const Json& got);

 private:
  const Json& value_;
  std::string path_;
  std::optional<ApiError> error_;
};

// Joins a path and an index: "messages" + 2 → "messages[2]".
std::string indexed_path(const std::string& path, size_t index);

}  // namespace beam::server
