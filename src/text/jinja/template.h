// A parsed Jinja template and its render entry point: the public face of the jinja engine.
// Semantics follow @huggingface/jinja (the renderer of Hugging Face's JavaScript libraries and the
// reference our tests compare against byte for byte); see docs in chat_template.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "text/jinja/ast.h"
#include "text/jinja/value.h"

namespace beam::text::jinja {

// Guards against runaway templates; exceeding one fails the render with a message naming it.
struct RenderLimits {
  size_t max_output_bytes = 64u << 20;  // also the largest string or JSON text a render may build
  size_t max_list_items = 1u << 20;     // largest list a render may build (range, +, ...)
  uint64_t max_steps = 20'000'000;      // evaluation steps plus work done by filters
  int max_depth = 500;                  // nesting of evaluation, macro calls included
};

struct RenderOptions {
  RenderLimits limits;
  std::optional<std::time_t> now;  // the clock strftime_now reads; the current time when unset
};

// Variables visible to the template (besides the builtins: true, false, none, namespace, range,
// raise_exception, strftime_now). A name given here shadows a builtin of the same name.
using Variables = std::vector<std::pair<std::string, Value>>;

// Immutable after parse; render() may run concurrently from several threads.
class Template {
 public:
  // Errors name the line and column of the problem ("line 3, column 8: ...").
  static Expected<Template> parse(std::string source);

  Expected<std::string> render(const Variables& variables, const RenderOptions& options = {}) const;

  const std::string& source() const { return source_; }

 private:
  Template(std::string source, Block program) : source_(std::move(source)), program_(std::move(program)) {}

  std::string source_;
  Block program_;
};

}  // namespace beam::text::jinja
