// ApiError rendering for the two wire formats (see api_error.h).
#include "server/api/api_error.h"

#include <nlohmann/json.hpp>

namespace beam::server {
namespace {

const char* openai_type(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidRequest: return "invalid_request_error";
    case ErrorKind::kAuthentication: return "authentication_error";
    case ErrorKind::kNotFound: return "not_found_error";
    case ErrorKind::kMethodNotAllowed: return "invalid_request_error";
    case ErrorKind::kRequestTooLarge: return "invalid_request_error";
    case ErrorKind::kUnavailable: return "service_unavailable_error";
    case ErrorKind::kServer: return "server_error";
  }
  return "server_error";
}

const char* anthropic_type(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidRequest: return "invalid_request_error";
    case ErrorKind::kAuthentication: return "authentication_error";
    case ErrorKind::kNotFound: return "not_found_error";
    case ErrorKind::kMethodNotAllowed: return "invalid_request_error";
    case ErrorKind::kRequestTooLarge: return "request_too_large";
    case ErrorKind::kUnavailable: return "overloaded_error";
    case ErrorKind::kServer: return "api_error";
  }
  return "api_error";
}

nlohmann::ordered_json null_if_empty(const std::string& s) {
  return s.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s);
}

}  // namespace

int http_status(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidRequest: return 400;
    case ErrorKind::kAuthentication: return 401;
    case ErrorKind::kNotFound: return 404;
    case ErrorKind::kMethodNotAllowed: return 405;
    case ErrorKind::kRequestTooLarge: return 413;
    case ErrorKind::kUnavailable: return 503;
    case ErrorKind::kServer: return 500;
  }
  return 500;
}

ApiError api_error(ErrorKind kind, std::string message, std::string param, std::string code) {
  ApiError e;
  e.kind = kind;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

ApiError request_aborted(const std::string& before) {
  return api_error(ErrorKind::kUnavailable,
                   "the request was aborted before " + before +
                       " (/abort_request, a pause that aborts, or a weight update that aborts "
                       "requests); send it again");
}

ApiError invalid_request(std::string message, std::string param, std::string code) {
  return api_error(ErrorKind::kInvalidRequest, std::move(message), std::move(param), std::move(code));
}

std::string openai_error_body(const ApiError& error) {
  nlohmann::ordered_json body = {{"error",
                                  {{"message", error.message},
                                   {"type", openai_type(error.kind)},
                                   {"param", null_if_empty(error.param)},
                                   {"code", null_if_empty(error.code)}}}};
  return body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string anthropic_error_body(const ApiError& error) {
  nlohmann::ordered_json body = {{"type", "error"},
                                 {"error", {{"type", anthropic_type(error.kind)}, {"message", error.message}}}};
  return body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace beam::server
