// ApiError: a client-facing error with its HTTP status, rendered as OpenAI-shaped JSON
// ({"error": {...}}) or Anthropic-shaped JSON ({"type": "error", "error": {...}}); and
// ApiExpected<T>, a value or an ApiError, which every request parser returns.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace beam::server {

// The error classes both APIs distinguish; each maps to one HTTP status.
enum class ErrorKind {
  kInvalidRequest,   // 400: malformed JSON, wrong types, bad values, prompt too long
  kAuthentication,   // 401: missing or wrong API key
  kNotFound,         // 404: unknown route or model
  kMethodNotAllowed, // 405
  kRequestTooLarge,  // 413: body over --max-body-mb
  kUnavailable,      // 503: still loading, or the engine loop is not advancing
  kServer,           // 500: the engine failed the request
};

struct ApiError {
  ErrorKind kind = ErrorKind::kInvalidRequest;
  std::string message;
  std::string param;  // the offending request field ("messages[1].content"), or empty
  std::string code;   // machine-readable code ("context_length_exceeded"), or empty
};

int http_status(ErrorKind kind);
ApiError api_error(ErrorKind kind, std::string message, std::string param = "", std::string code = "");
ApiError invalid_request(std::string message, std::string param = "", std::string code = "");
// 503 for a request the server aborted (/abort_request, a pause that aborts, a weight update
// that aborts requests) where its API has no partial answer to give: "the request was aborted
// before <before> (...); send it again".
ApiError request_aborted(const std::string& before);

// {"error": {"message", "type", "param", "code"}} (null param/code when empty).
std::string openai_error_body(const ApiError& error);
// {"type": "error", "error": {"type", "message"}}.
std::string anthropic_error_body(const ApiError& error);

// A T or an ApiError (the request-parsing counterpart of beam::Expected).
template <typename T>
class [[nodiscard]] ApiExpected {
 public:
  ApiExpected(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  ApiExpected(ApiError error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const ApiError& error() const { assert(!ok()); return std::get<1>(v_); }

 private:
  std::variant<T, ApiError> v_;
};

}  // namespace beam::server

// Bind the value of an ApiExpected<T> expression or return its ApiError.
#define API_ASSIGN_OR_RETURN(lhs, expr)                               \
  auto BEAM_API_CONCAT(api_expected_, __LINE__) = (expr);             \
  if (!BEAM_API_CONCAT(api_expected_, __LINE__).ok())                 \
    return BEAM_API_CONCAT(api_expected_, __LINE__).error();          \
  lhs = std::move(BEAM_API_CONCAT(api_expected_, __LINE__)).value()
#define BEAM_API_CONCAT_INNER(a, b) a##b
#define BEAM_API_CONCAT(a, b) BEAM_API_CONCAT_INNER(a, b)
