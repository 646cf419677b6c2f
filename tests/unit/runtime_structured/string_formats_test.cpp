// The enforced string formats: each compiles within the automaton limits and accepts its RFC's
// examples and refuses near misses; a format meets a pattern as their intersection.
#include "runtime/structured/string_formats.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/structured/byte_dfa.h"
#include "structured_test_util.h"

namespace beam {
namespace {

using testing::grammar_of;
using testing::matches;

TEST(StringFormats, EachFormatAcceptsItsTextsOnly) {
  struct Case {
    const char* format;
    std::vector<std::string> yes, no;
  };
  const std::vector<Case> cases = {
      {"date", {"2026-12-04", "2000-02-29"}, {"2026-13-01", "2026-12-32", "26-12-04", "2026-1-04"}},
      {"time",
       {"23:59:60Z", "08:30:00.123+05:30", "00:00:00-00:00"},
       {"24:00:00Z", "08:30:00", "08:30Z", "08:30:00.Z", "08:30:00.1234567890Z"}},
      {"date-time",
       {"2026-12-04T16:12:57Z", "1999-01-01T00:00:00.5-08:00"},
       {"2026-12-04 16:12:57Z", "2026-12-04T16:12:57", "2026-12-04"}},
      {"duration",
       {"P1D", "PT5M", "P1Y2M3DT4H5M6S", "P3W", "P1MT1S"},
       {"P", "PT", "1D", "P1DT", "P1W1D", "P1S"}},
      {"email",
       {"ann@example.com", "a.b+c@mail.example.org", "x_y@a-b.co"},
       {"ann@", "@example.com", "ann@example", "a..b@example.com", "ann@-x.com", "a b@x.com"}},
      {"hostname", {"example", "a-b.example.com", "x1.y2"}, {"-a", "a-", "a..b", "a_b", ""}},
      {"ipv4", {"0.0.0.0", "192.168.1.255", "255.255.255.255"}, {"256.1.1.1", "1.2.3", "01.2.3.4"}},
      {"ipv6",
       {"::", "::1", "fe80::1", "2001:db8:0:0:0:0:2:1", "2001:db8::2:1", "1::"},
       {":", "1:2:3:4:5:6:7:8:9", "2001:db8:::1", "g::1", "1::2::3"}},
      {"uuid",
       {"123e4567-e89b-12d3-a456-426614174000", "ABCDEF01-2345-6789-ABCD-EF0123456789"},
       {"123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.format);
    const std::optional<std::string> regex = format_regex(c.format);
    ASSERT_TRUE(regex.has_value());
    auto dfa = ByteDfa::from_pattern(*regex);
    ASSERT_TRUE(dfa.ok()) << dfa.error().message;
    std::printf("%-9s %4zu states\n", c.format, (*dfa)->num_states());
    for (const std::string& s : c.yes) EXPECT_TRUE((*dfa)->matches(s)) << s;
    for (const std::string& s : c.no) EXPECT_FALSE((*dfa)->matches(s)) << s;
  }
  EXPECT_FALSE(format_regex("uri").has_value());  // stays an annotation
}

TEST(StringFormats, SchemasEnforceFormatsOnStringsAndMeetPatterns) {
  const JsonMatcher date(grammar_of(R"({"type":"string","format":"date"})"));
  EXPECT_TRUE(matches(date, R"("2026-12-04")", true));
  EXPECT_FALSE(matches(date, R"("2026-13)", false));
  // A format unknown here, or one without a string type, constrains nothing.
  const JsonMatcher uri(grammar_of(R"({"type":"string","format":"uri"})"));
  EXPECT_TRUE(matches(uri, R"("not a uri")", true));
  const JsonMatcher untyped(grammar_of(R"({"format":"date"})"));
  EXPECT_TRUE(matches(untyped, "12", true));
  // pattern and format both hold.
  const JsonMatcher both(grammar_of(R"({"type":"string","format":"date","pattern":"^2026-"})"));
  EXPECT_TRUE(matches(both, R"("2026-01-31")", true));
  EXPECT_FALSE(matches(both, R"("2025)", false));
  EXPECT_NE(
      testing::schema_error(R"({"type":"string","format":"date","pattern":"^x"})")
          .find("\"pattern\" and \"format\" together: the regular expression matches no string"),
      std::string::npos);
}

}  // namespace
}  // namespace beam
