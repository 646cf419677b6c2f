// Template error helpers: throwing and describing with a line and column.
#include "text/jinja/error.h"

#include "text/jinja/js_string.h"

namespace beam::text::jinja {

void fail(std::string message, uint32_t offset) {
  throw TemplateError{ErrorKind::kRender, std::move(message), offset};
}

void fail_syntax(std::string message, uint32_t offset) {
  throw TemplateError{ErrorKind::kSyntax, std::move(message), offset};
}

void fail_limit(std::string message) {
  throw TemplateError{ErrorKind::kLimit, std::move(message), kNoOffset};
}

LineColumn line_column(std::string_view source, uint32_t offset) {
  LineColumn lc;
  size_t end = offset < source.size() ? offset : source.size();
  size_t pos = 0;
  while (pos < end) {
    if (source[pos] == '\n') {
      ++lc.line;
      lc.column = 1;
      ++pos;
      continue;
    }
    decode_utf8(source, pos);
    ++lc.column;
  }
  return lc;
}

std::string describe(const TemplateError& error, std::string_view source) {
  std::string text;
  switch (error.kind) {
    case ErrorKind::kSyntax: text = "syntax error"; break;
    case ErrorKind::kRender: text = "render error"; break;
    case ErrorKind::kRaised: text = "template raised an exception"; break;
    case ErrorKind::kLimit: text = "render limit exceeded"; break;
  }
  if (error.offset != kNoOffset) {
    LineColumn lc = line_column(source, error.offset);
    text += " at line " + std::to_string(lc.line) + ", column " + std::to_string(lc.column);
  }
  return text + ": " + error.message;
}

}  // namespace beam::text::jinja
