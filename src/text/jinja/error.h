// Errors raised while lexing, parsing or rendering a template. Inside the engine they travel as a
// thrown TemplateError (deep recursion makes values-everywhere noisy); Template (template.h) is
// the boundary that turns them into Error values naming the template line and column.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace beam::text::jinja {

constexpr uint32_t kNoOffset = UINT32_MAX;

enum class ErrorKind {
  kSyntax,  // the template text cannot be tokenized or parsed
  kRender,  // an operation failed while rendering (bad types, unknown filter, ...)
  kRaised,  // the template called raise_exception(message)
  kLimit,   // a render limit (output size, steps, depth) was exceeded
};

struct TemplateError {
  ErrorKind kind = ErrorKind::kRender;
  std::string message;
  uint32_t offset = kNoOffset;  // byte offset into the template source, kNoOffset when unknown

  // Records where the error happened unless an inner node already did.
  void locate(uint32_t at) {
    if (offset == kNoOffset) offset = at;
  }
};

[[noreturn]] void fail(std::string message, uint32_t offset = kNoOffset);
[[noreturn]] void fail_syntax(std::string message, uint32_t offset);
[[noreturn]] void fail_limit(std::string message);

struct LineColumn {
  int line = 1;    // 1-based
  int column = 1;  // 1-based, in code points
};
LineColumn line_column(std::string_view source, uint32_t offset);

// "syntax error at line 3, column 7: <message>" (no location part when it is unknown).
std::string describe(const TemplateError& error, std::string_view source);

}  // namespace beam::text::jinja
