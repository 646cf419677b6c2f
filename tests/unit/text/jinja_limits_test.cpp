// Render limits: runaway templates (huge loops, unbounded recursion, exploding strings and lists,
// cyclic namespaces, absurd nesting) fail with a clear message instead of hanging or crashing.
#include <string>

#include <gtest/gtest.h>

#include "jinja_test_util.h"

namespace beam::text::jinja {
namespace {

using testing::render_error;

RenderOptions small_limits() {
  RenderOptions options;
  options.limits.max_output_bytes = 1 << 20;
  options.limits.max_list_items = 100000;
  options.limits.max_steps = 1000000;
  options.limits.max_depth = 200;
  return options;
}

bool mentions(const std::string& message, const std::string& part) { return message.find(part) != std::string::npos; }

TEST(JinjaLimits, HugeRangeIsRefused) {
  std::string m = render_error("{% for i in range(100000000) %}{% endfor %}", "{}", small_limits());
  EXPECT_TRUE(mentions(m, "render limit exceeded")) << m;
  EXPECT_TRUE(mentions(m, "list over 100000 items")) << m;
}

TEST(JinjaLimits, StepBudgetStopsNestedLoops) {
  std::string m = render_error(
      "{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}{% endfor %}{% endfor %}"
      "{% endfor %}",
      "{}", small_limits());
  EXPECT_TRUE(mentions(m, "exceeded 1000000 steps")) << m;
}

TEST(JinjaLimits, UnboundedRecursionIsRefused) {
  std::string m = render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "{}", small_limits());
  EXPECT_TRUE(mentions(m, "nested deeper than 200 levels")) << m;
}

TEST(JinjaLimits, ExplodingStringIsRefused) {
  std::string m = render_error(
      "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "{}",
      small_limits());
  EXPECT_TRUE(mentions(m, "string over 1048576 bytes")) << m;
}

TEST(JinjaLimits, ExplodingListIsRefused) {
  std::string m = render_error(
      "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}", "{}",
      small_limits());
  EXPECT_TRUE(mentions(m, "list over 100000 items")) << m;
}

TEST(JinjaLimits, OutputSizeIsBounded) {
  std::string m = render_error("{% for i in range(70000) %}{{ '0123456789abcdef' }}{% endfor %}", "{}", small_limits());
  EXPECT_TRUE(mentions(m, "output exceeds 1048576 bytes")) << m;
}

TEST(JinjaLimits, CyclicNamespaceFailsToPrint) {
  std::string m = render_error("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns }}", "{}", small_limits());
  EXPECT_TRUE(mentions(m, "nested deeper than")) << m;
}

TEST(JinjaLimits, AbsurdNestingIsASyntaxError) {
  std::string deep_parens = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_TRUE(mentions(render_error(deep_parens), "nested more than 256 levels"));
  std::string deep_ifs;
  for (int i = 0; i < 1000; ++i) deep_ifs += "{% if true %}";
  EXPECT_TRUE(mentions(render_error(deep_ifs), "nested more than 256 levels"));
  // Left-deep chains and elif ladders nest too (evaluating and freeing them recurses).
  std::string long_sum = "{{ 1";
  for (int i = 0; i < 20000; ++i) long_sum += " + 1";
  EXPECT_TRUE(mentions(render_error(long_sum + " }}"), "nested more than 256 levels"));
  std::string elifs = "{% if false %}";
  for (int i = 0; i < 20000; ++i) elifs += "{% elif false %}";
  EXPECT_TRUE(mentions(render_error(elifs + "{% endif %}"), "nested more than 256 levels"));
  std::string filters = "{{ 'x'";
  for (int i = 0; i < 20000; ++i) filters += "|trim";
  EXPECT_TRUE(mentions(render_error(filters + " }}"), "nested more than 256 levels"));
}

TEST(JinjaLimits, DeeplyNestedValuesAreRefused) {
  std::string m = render_error(
      "{% set ns = namespace(v=[]) %}{% for i in range(2000) %}{% set ns.v = [ns.v] %}{% endfor %}", "{}",
      small_limits());
  EXPECT_TRUE(mentions(m, "value nested deeper than 1000 levels")) << m;
  m = render_error("{% set ns = namespace(v={}) %}{% for i in range(2000) %}{% set ns.v = {'k': ns.v} %}{% endfor %}",
                   "{}", small_limits());
  EXPECT_TRUE(mentions(m, "value nested deeper than 1000 levels")) << m;
}

TEST(JinjaLimits, ChainsWithinTheLimitWork) {
  std::string sum = "{{ 0";
  for (int i = 0; i < 200; ++i) sum += " + 1";
  EXPECT_EQ(testing::render_ok(sum + " }}"), "200");
}

TEST(JinjaLimits, ModerateTemplatesStayWithinDefaults) {
  EXPECT_EQ(testing::render_ok("{% for i in range(20000) %}{% endfor %}{{ range(1000)|length }}"), "1000");
}

}  // namespace
}  // namespace beam::text::jinja
