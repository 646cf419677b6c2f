// Helpers for the constrained-decoding tests: grammars from schema text, feeding bytes, and a
// brute-force token mask to check VocabIndex against.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/structured/json_grammar.h"
#include "runtime/structured/json_matcher.h"
#include "runtime/structured/vocab_index.h"

namespace beam::testing {

inline std::shared_ptr<const JsonGrammar> grammar_of(std::string_view schema_json) {
  auto g = JsonGrammar::from_schema(nlohmann::ordered_json::parse(schema_json));
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  return g.ok() ? *g : nullptr;
}

inline std::string schema_error(std::string_view schema_json) {
  auto g = JsonGrammar::from_schema(nlohmann::ordered_json::parse(schema_json));
  return g.ok() ? "" : g.error().message;
}

// 0: the text breaks the grammar; 1: a prefix of a match; 2: a whole match.
inline int verdict(const EbnfMatcher& m, std::string_view text) {
  GrammarState state = m.initial(), scratch;
  if (!m.advance_bytes(state, text, scratch)) return 0;
  return m.can_end(state) ? 2 : 1;
}

// Whether `text` is a prefix of some JSON text of the grammar (and, with complete, a whole one).
inline bool matches(const JsonMatcher& m, std::string_view text, bool complete) {
  MatchState state = m.initial(), scratch;
  if (!m.advance_bytes(state, text, scratch)) return false;
  return !complete || m.can_end(state);
}

// The allowed text tokens after `state`, one by one (what VocabIndex::add_allowed must equal).
inline std::vector<uint32_t> brute_force_mask(const JsonMatcher& m, const MatchState& state,
                                              const VocabIndex& vocab) {
  std::vector<uint32_t> bits(allowed_mask_words(vocab.vocab_size()), 0);
  MatchState scratch;
  for (int32_t id = 0; id < vocab.vocab_size(); ++id) {
    std::string_view bytes = vocab.bytes(id);
    if (bytes.empty()) continue;
    MatchState s = state;
    if (m.advance_bytes(s, bytes, scratch)) set_mask_bit(bits, id);
  }
  return bits;
}

}  // namespace beam::testing
