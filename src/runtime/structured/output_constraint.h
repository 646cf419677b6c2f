// OutputConstraint: what a request's output must be — JSON text of a schema's grammar, text a
// regular expression or a GBNF grammar matches whole, written with the model's tokens — and
// ConstraintState, one sequence's position in it (docs/structured_output.md).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runtime/structured/byte_dfa.h"
#include "runtime/structured/ebnf_matcher.h"
#include "runtime/structured/json_matcher.h"
#include "runtime/structured/regex_mask_cache.h"
#include "runtime/structured/vocab_index.h"

namespace beam {

struct OutputConstraint {
  std::shared_ptr<const JsonGrammar> grammar = nullptr;  // JSON text of it; or
  std::shared_ptr<const ByteDfa> regex = nullptr;        // text it matches whole; or
  std::shared_ptr<const EbnfGrammar> ebnf = nullptr;     // text it matches whole (one of the three)
  std::shared_ptr<const VocabIndex> vocab = nullptr;
  // Text tokens of `vocab` this output does not show (special tokens its detokenizer skips): no
  // mask allows them as text. Nor does any allow the end tokens as text: only where it may end.
  std::vector<int32_t> hidden_tokens = {};
  // Free text before the constrained text (a model's reasoning), ended by the tokens json_after:
  // a single </think>, or the header that opens a channel template's answer
  // (`<|channel|>final<|message|>` as the tokenizer writes it). With reasoning_open set (a single
  // <think>), the first token may be it instead of the constrained text, and the output is then
  // free until json_after. starts_in_reasoning: the output is free from its first token until
  // json_after (the prompt left the reasoning open, or the answer needs its header).
  std::optional<int32_t> reasoning_open = std::nullopt;
  std::vector<int32_t> json_after = {};
  bool starts_in_reasoning = false;
  // A tool call's delimiters (Hermes / Qwen `<tool_call>` ... `</tool_call>`): once the JSON is
  // complete call_close may follow besides the end tokens, and after it only more calls: the end
  // tokens, one whitespace-only token, and call_open where set (parallel calls), which starts the
  // next call's JSON from the grammar's start. Neither is ever allowed as text (inside a JSON
  // string the close would end the call for the output parser). Unset: the output ends with the
  // JSON.
  std::optional<int32_t> call_close = std::nullopt;
  std::optional<int32_t> call_open = std::nullopt;
  // Memoized masks inside patterned strings, shared by the request's sequences.
  std::shared_ptr<PatternMaskCache> pattern_masks = std::make_shared<PatternMaskCache>();
  // Memoized masks of `ebnf` by matcher state, shared by the request's sequences.
  std::shared_ptr<GrammarMaskCache> grammar_masks = std::make_shared<GrammarMaskCache>();
  // Memoized masks of `regex` by DFA state, shared by the request's sequences.
  std::shared_ptr<RegexMaskCache> regex_masks = std::make_shared<RegexMaskCache>();
};

// Owner: the sequence's sampling state (engine thread).
class ConstraintState {
 public:
  explicit ConstraintState(std::shared_ptr<const OutputConstraint> constraint);

  // Whether the next token is constrained (false while the model reasons).
  bool active() const { return phase_ != Phase::kReasoning; }
  // Overwrites bits (allowed_mask_words(vocab) words) with the tokens allowed next: every text
  // token that keeps a parse alive, end_tokens and call_close when the JSON is complete, and
  // reasoning_open before the first token; between calls the end tokens, call_open and whitespace.
  // Needs active(). An error naming why when no mask comes: no token is allowed (the state is
  // dead), or a grammar needs more than kMaxMaskParseSteps expansions for this mask.
  Status fill_allowed(std::span<uint32_t> bits, std::span<const int32_t> end_tokens,
                      MaskScratch& scratch) const;
  // Records a committed output token; end_token: an eos or stop id (it ends the output). False
  // when the token breaks the constraint (it was outside the mask): the state is then dead.
  bool accept(int32_t token, bool end_token);

 private:
  // The matcher or automaton at the constrained text's start (a new call's too).
  void restart();
  // Marks the state broken (a token outside the mask came); dead() says so.
  void kill();
  bool dead() const;
  // Whether the constrained text so far may end here.
  bool can_end() const;
  // accept() after a call's close delimiter.
  bool accept_between_calls(int32_t token, bool end_token);
  // Moves past a text token's bytes; false (nothing moved) when they break the constraint.
  bool advance(std::string_view bytes);

  std::shared_ptr<const OutputConstraint> constraint_;
  std::optional<JsonMatcher> matcher_;  // with a grammar
  MatchState state_;
  MatchState scratch_;
  std::optional<EbnfMatcher> ebnf_matcher_;  // with an ebnf grammar
  GrammarState ebnf_state_;
  GrammarState ebnf_scratch_;
  int32_t dfa_state_ = 0;  // with a regex: ByteDfa::kDead once broken
  enum class Phase { kJsonOrReasoning, kReasoning, kJson, kBetweenCalls };
  Phase phase_ = Phase::kJson;
  bool gap_written_ = false;     // kBetweenCalls: the whitespace token between calls came
  std::vector<int32_t> recent_;  // kReasoning: the last tokens, up to json_after's length
};

}  // namespace beam
