// Helpers shared by the response_template parser tests: template loading, one-shot and chunked
// parses, and a JSON comparison that (like Python) tells 1 from 1.0.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/parsers/response_parser.h"
#include "server/parsers/response_template.h"

namespace beam::server::testing {

inline std::shared_ptr<const ResponseTemplate> load_template(std::string_view json_text) {
  Json spec = Json::parse(json_text);
  auto loaded = load_response_template(spec);
  EXPECT_TRUE(loaded.ok()) << (loaded.ok() ? "" : loaded.error().message);
  return loaded.ok() ? *loaded : nullptr;
}

// One parse: the final message (or error) plus everything the event stream carried.
struct ParseRun {
  std::optional<Json> message;
  std::string error;
  std::vector<ParseEvent> events;  // initial events first
  // Per field name: concatenated region_chunk text.
  std::string chunks_of(const ResponseTemplate& t, std::string_view field) const {
    std::string out;
    for (const ParseEvent& e : events) {
      if (e.kind == ParseEvent::Kind::kRegionChunk && t.fields[e.field].name == field)
        out += e.text;
    }
    return out;
  }
};

// Parses `prefix` + the given chunks of generated text.
inline ParseRun parse_chunks(const std::shared_ptr<const ResponseTemplate>& t,
                             std::string_view prefix, const std::vector<std::string_view>& chunks,
                             ParserOptions options = {}) {
  ParseRun run;
  auto parser = ResponseParser::create(t, prefix, std::move(options));
  if (!parser.ok()) {
    run.error = parser.error().message;
    return run;
  }
  run.events = parser->initial_events();
  for (std::string_view chunk : chunks) {
    if (Status s = parser->feed(chunk, &run.events); !s.ok()) {
      run.error = s.error().message;
      return run;
    }
  }
  auto message = parser->finalize(&run.events);
  if (!message.ok()) {
    run.error = message.error().message;
    return run;
  }
  run.message = *message;
  return run;
}

inline ParseRun parse_once(const std::shared_ptr<const ResponseTemplate>& t,
                           std::string_view prefix, std::string_view text,
                           ParserOptions options = {}) {
  return parse_chunks(t, prefix, {text}, std::move(options));
}

// Splits `text` at the given cut positions (sorted, inside the text).
inline std::vector<std::string_view> split_at(std::string_view text,
                                              const std::vector<size_t>& cuts) {
  std::vector<std::string_view> out;
  size_t prev = 0;
  for (size_t c : cuts) {
    out.push_back(text.substr(prev, c - prev));
    prev = c;
  }
  out.push_back(text.substr(prev));
  return out;
}

// Deep equality where integers and floats differ (Python's 1 != 1.0 in a JSON dump sense).
inline bool strict_equal(const Json& a, const Json& b) {
  const bool a_int = a.is_number_integer();
  const bool b_int = b.is_number_integer();
  if (a.is_number() && b.is_number()) {
    if (a_int != b_int) return false;
    if (a_int) return a == b;
    return a.get<double>() == b.get<double>();
  }
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto other = b.find(it.key());
      if (other == b.end() || !strict_equal(it.value(), *other)) return false;
    }
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!strict_equal(a[i], b[i])) return false;
    }
    return true;
  }
  return a == b;
}

#define EXPECT_JSON_EQ(actual, expected)                                   \
  EXPECT_TRUE(::beam::server::testing::strict_equal((actual), (expected))) \
      << "actual:   " << ::beam::server::json_text(actual)                 \
      << "\nexpected: " << ::beam::server::json_text(expected)

}  // namespace beam::server::testing
