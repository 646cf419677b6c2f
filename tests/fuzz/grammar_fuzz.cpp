// libFuzzer target for the structured-output compilers (src/runtime/structured), which read
// untrusted request fields. The first input byte picks what the rest is:
//   0: a grammar, GBNF or Lark (EbnfGrammar::compile_gbnf_or_lark);
//   1: a JSON schema (JsonGrammar::from_schema; text that is not JSON is skipped);
//   2: a regex (ByteDfa::from_pattern and from_full_match);
//   3: a structural tag (compile_structural_tag; text that is not JSON is skipped).
// A compiler must give a value or an error; whatever compiles is then matched against the input's
// own bytes. Any crash, sanitizer report, leak or hang past the compilers' documented bounds
// (about a second each) is a bug. Built with clang -fsanitize=fuzzer,address,undefined.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "runtime/structured/byte_dfa.h"
#include "runtime/structured/ebnf_grammar.h"
#include "runtime/structured/ebnf_matcher.h"
#include "runtime/structured/json_grammar.h"
#include "runtime/structured/json_matcher.h"
#include "runtime/structured/structural_tag.h"

namespace {

using beam::ByteDfa;
using beam::EbnfGrammar;
using beam::EbnfMatcher;
using beam::JsonGrammar;
using beam::JsonMatcher;

// Feeds text to a grammar or JSON matcher byte by byte while it stays alive.
template <typename Matcher>
void match(const Matcher& m, std::string_view text) {
  auto state = m.initial(), scratch = state;
  for (char c : text) {
    if (!m.advance_bytes(state, std::string_view(&c, 1), scratch)) return;
    (void)m.can_end(state);
  }
}

void match_dfa(const ByteDfa& dfa, std::string_view text) {
  int32_t s = 0;
  for (char c : text) {
    s = dfa.walk(s, std::string_view(&c, 1));
    if (s == ByteDfa::kDead) return;
    (void)dfa.accepting(s);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 4) {
    case 0:
      if (auto g = EbnfGrammar::compile_gbnf_or_lark(text); g.ok()) match(EbnfMatcher(*g), text);
      break;
    case 1: {
      const auto schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (schema.is_discarded()) break;
      if (auto g = JsonGrammar::from_schema(schema); g.ok()) match(JsonMatcher(*g), text);
      break;
    }
    case 2:
      if (auto dfa = ByteDfa::from_pattern(text); dfa.ok()) match_dfa(**dfa, text);
      if (auto dfa = ByteDfa::from_full_match(text); dfa.ok()) match_dfa(**dfa, text);
      break;
    case 3: {
      const auto tag = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (tag.is_discarded()) break;
      if (auto g = beam::compile_structural_tag(tag); g.ok()) match(EbnfMatcher(*g), text);
      break;
    }
  }
  return 0;
}
