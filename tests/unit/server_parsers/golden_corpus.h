// The golden fixture corpus (tests/data/response_templates/*.json), loaded once per test binary.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/parsers/python_text.h"

namespace beam::server::testing {

struct GoldenCase {
  std::string name;
  std::string prefix;
  std::string output;
  Json tools;                          // null or an OpenAI tools array
  Json expected;                       // the message transformers returned
  std::optional<Json> expected_error;  // {"type", "message"} when transformers raised
};

struct GoldenTemplate {
  std::string name;
  std::string generated_by;
  Json spec;
  std::vector<GoldenCase> cases;
};

struct GoldenSchemaError {
  std::string name;
  Json spec;
  std::string message;
};

struct GoldenCorpus {
  std::vector<GoldenTemplate> templates;
  std::vector<GoldenSchemaError> schema_errors;
};

const GoldenCorpus& golden_corpus();

}  // namespace beam::server::testing
