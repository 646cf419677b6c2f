// Template: parse and render, the boundary where thrown TemplateErrors become Error values.
#include "text/jinja/template.h"

#include "text/jinja/error.h"
#include "text/jinja/globals.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/lexer.h"
#include "text/jinja/parser.h"
#include "text/jinja/runtime.h"
#include "text/jinja/scope.h"

namespace beam::text::jinja {

Expected<Template> Template::parse(std::string source) {
  try {
    std::vector<Token> tokens = tokenize(source);
    Block program = jinja::parse(tokens, static_cast<uint32_t>(source.size()));
    return Template(std::move(source), std::move(program));
  } catch (const TemplateError& error) {
    return make_error(describe(error, source));
  }
}

Expected<std::string> Template::render(const Variables& variables, const RenderOptions& options) const {
  Runtime rt(options.limits, options.now ? *options.now : std::time(nullptr));
  auto builtins = std::make_shared<Scope>();
  install_globals(*builtins);
  auto globals = std::make_shared<Scope>(builtins);
  for (const auto& [name, value] : variables) globals->set(name, value);
  std::string out;
  try {
    Interpreter(rt).run(program_, globals, out);
  } catch (const TemplateError& error) {
    return make_error(describe(error, source_));
  }
  return out;
}

}  // namespace beam::text::jinja
