// Error reporting of the jinja engine: syntax and render errors name the template line and
// column; raise_exception carries the template's message; unsupported syntax is rejected.
#include <string>

#include <gtest/gtest.h>

#include "jinja_test_util.h"

namespace beam::text::jinja {
namespace {

using testing::render_error;

TEST(JinjaErrors, StrayEndTagNamesItsLine) {
  EXPECT_EQ(render_error("line one\n{% if x %}\n  {% endfor %}\n{% endif %}"),
            "syntax error at line 3, column 3: unexpected '{% endfor %}' with no open block it could close");
}

TEST(JinjaErrors, UnclosedBlockNamesTheOpener) {
  EXPECT_EQ(render_error("a\nb {% for x in xs %}\n{{ x }}"),
            "syntax error at line 2, column 3: unexpected end of template: '{% for %}' is never closed");
  EXPECT_NE(render_error("{% if a %}{% elif b %}").find("'{% if %}' is never closed"), std::string::npos);
  EXPECT_NE(render_error("{% macro m() %}").find("'{% macro %}' is never closed"), std::string::npos);
}

TEST(JinjaErrors, UnsupportedStatementNamesLineAndName) {
  EXPECT_EQ(render_error("ok\n\n  {% with x = 1 %}{% endwith %}"),
            "syntax error at line 3, column 3: unknown or unsupported statement 'with'");
  EXPECT_NE(render_error("{% include 'other.jinja' %}").find("unsupported statement 'include'"), std::string::npos);
  EXPECT_NE(render_error("{% raw %}x{% endraw %}").find("unsupported statement 'raw'"), std::string::npos);
}

TEST(JinjaErrors, LexerErrorsNameColumn) {
  EXPECT_EQ(render_error("{{ a @ b }}"), "syntax error at line 1, column 6: unexpected character '@'");
  EXPECT_EQ(render_error("x\n{{ 'abc }}"), "syntax error at line 2, column 4: unterminated string literal");
  EXPECT_EQ(render_error("{{ '\\q' }}"), "syntax error at line 1, column 5: unexpected escaped character 'q'");
  EXPECT_NE(render_error("{# never closed").find("missing end of comment tag"), std::string::npos);
  EXPECT_NE(render_error("{{ 'é' ~ ☃ }}").find("unexpected character '☃'"), std::string::npos);
}

TEST(JinjaErrors, ParserErrorsNameTheToken) {
  EXPECT_EQ(render_error("{{ x + }}"), "syntax error at line 1, column 8: unexpected '}}' in an expression");
  EXPECT_EQ(render_error("{% for 1 in xs %}{% endfor %}"),
            "syntax error at line 1, column 8: expected a name or a tuple of names as the loop variable");
  EXPECT_EQ(render_error("{{ x }"), "syntax error at line 1, column 6: expected '}}', got '}'");
  EXPECT_EQ(render_error("{{ x"), "syntax error at line 1, column 5: unexpected end of template inside a tag");
  EXPECT_EQ(render_error("{{ x "), "syntax error at line 1, column 6: unexpected end of template inside a tag");
  EXPECT_EQ(render_error("{% if x %}{{ y }}"), "syntax error at line 1, column 1: unexpected end of template: '{% if %}' is never closed");
  EXPECT_NE(render_error("{{ f(a=1, 2) }}").find("positional argument follows keyword argument"), std::string::npos);
  EXPECT_NE(render_error("{% macro m(a=1, b) %}{% endmacro %}").find("non-default parameter"), std::string::npos);
  EXPECT_NE(render_error("{% set 1 = 2 %}").find("cannot assign"), std::string::npos);
  EXPECT_NE(render_error("{{ x[] }}").find("expected an index or a slice"), std::string::npos);
  EXPECT_NE(render_error("{{ x[1:2:3:4] }}").find("at most three parts"), std::string::npos);
}

TEST(JinjaErrors, RenderErrorsNameTheLine) {
  EXPECT_EQ(render_error("a\nb\n  {{ 'x' | frobnicate }}"),
            "render error at line 3, column 6: unknown filter 'frobnicate' for a string value");
  EXPECT_EQ(render_error("{% for m in messages %}\n{{ m.content.strip() - 1 }}{% endfor %}",
                         R"({"messages": [{"content": "hi"}]})"),
            "render error at line 2, column 4: unsupported operand types for '-': string and integer");
}

TEST(JinjaErrors, RaiseExceptionCarriesMessageAndLine) {
  EXPECT_EQ(render_error("{% if messages|length == 0 %}\n  {{- raise_exception('No messages given!') }}\n{% endif %}",
                         R"({"messages": []})"),
            "template raised an exception at line 2, column 7: No messages given!");
}

TEST(JinjaErrors, ParseErrorsAreReportedBeforeRendering) {
  auto parsed = Template::parse("{% if %}");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().message.find("line 1"), std::string::npos);
}

}  // namespace
}  // namespace beam::text::jinja
