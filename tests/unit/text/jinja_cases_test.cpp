// Feature-by-feature rendering cases from tests/templates/jinja_cases.json: whitespace control,
// literals, variables, operators, slicing, control flow, macros, string methods, filters, tojson,
// tests, globals, runtime errors. check_reference.mjs verifies the same expectations against
// @huggingface/jinja, so every "expected" here is the reference's output too.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "jinja_test_util.h"

namespace beam::text::jinja {
namespace {

using nlohmann::ordered_json;

const ordered_json& all_cases() {
  static const ordered_json cases = [] {
    std::ifstream in(std::string(BEAMSERVE_SOURCE_DIR) + "/tests/templates/jinja_cases.json");
    std::stringstream ss;
    ss << in.rdbuf();
    return ordered_json::parse(ss.str(), nullptr, false);
  }();
  return cases;
}

std::vector<std::string> group_names() {
  std::vector<std::string> names;
  if (all_cases().is_object() && all_cases().contains("groups")) {
    for (const auto& [name, cases] : all_cases()["groups"].items()) names.push_back(name);
  }
  return names;
}

class JinjaCases : public ::testing::TestWithParam<std::string> {};

TEST(JinjaCasesFile, Loads) {
  ASSERT_TRUE(all_cases().is_object()) << "tests/templates/jinja_cases.json missing or invalid";
  EXPECT_GE(group_names().size(), 10u);
}

TEST_P(JinjaCases, RenderAsExpected) {
  const ordered_json& cases = all_cases()["groups"][GetParam()];
  ASSERT_FALSE(cases.empty());
  for (const auto& c : cases) {
    std::string name = c["name"].get<std::string>();
    std::string source = c["template"].get<std::string>();
    std::string context = c.contains("context") ? c["context"].dump() : "{}";
    SCOPED_TRACE(name + ": " + source);
    if (c.contains("error")) {
      std::string message = testing::render_error(source, context);
      EXPECT_NE(message.find(c["error"].get<std::string>()), std::string::npos) << message;
    } else {
      EXPECT_EQ(testing::render_ok(source, context), c["expected"].get<std::string>());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Groups, JinjaCases, ::testing::ValuesIn(group_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace beam::text::jinja
