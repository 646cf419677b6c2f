// Helpers for the jinja engine tests: render a template with a JSON context, expecting success
// or an error.
#pragma once

#include <ctime>
#include <string>
#include <string_view>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "text/jinja/template.h"
#include "text/jinja/value.h"

namespace beam::text::jinja::testing {

inline Variables variables_from_json(std::string_view context_json) {
  Variables vars;
  auto context = nlohmann::ordered_json::parse(context_json);
  for (const auto& [key, value] : context.items()) vars.emplace_back(key, value_from_json(value));
  return vars;
}

// Midnight of 2024-07-26 in the local time zone: a fixed clock for strftime_now.
inline std::time_t fixed_clock() {
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_isdst = -1;
  return std::mktime(&tm);
}

// Parse + render; the error message (parse or render) when either fails.
inline Expected<std::string> try_render(std::string_view source, std::string_view context_json = "{}",
                                        RenderOptions options = {}) {
  if (!options.now) options.now = fixed_clock();
  auto parsed = Template::parse(std::string(source));
  if (!parsed.ok()) return parsed.error();
  return parsed->render(variables_from_json(context_json), options);
}

inline std::string render_ok(std::string_view source, std::string_view context_json = "{}") {
  auto out = try_render(source, context_json);
  if (!out.ok()) {
    ADD_FAILURE() << "render failed: " << out.error().message << "\ntemplate: " << source;
    return "<error>";
  }
  return *out;
}

inline std::string render_error(std::string_view source, std::string_view context_json = "{}",
                                RenderOptions options = {}) {
  auto out = try_render(source, context_json, options);
  if (out.ok()) {
    ADD_FAILURE() << "expected an error, got output: " << *out << "\ntemplate: " << source;
    return "";
  }
  return out.error().message;
}

}  // namespace beam::text::jinja::testing
