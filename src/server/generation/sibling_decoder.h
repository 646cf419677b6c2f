// SiblingDecoder: the text pipeline of one generated sequence. Token ids (several per event are
// possible) → incremental detokenizer → stop-string matcher → response_template stream →
// reasoning / content / tool-call deltas, with each token (and its logprobs) released together
// with its text. Tokens past a stop string are dropped from text, ids, logprobs and counts alike.
// One owner thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "server/api/hidden_states.h"
#include "server/generation/generation_spec.h"
#include "server/generation/stop_matcher.h"
#include "server/parsers/response_stream.h"
#include "text/incremental_detokenizer.h"
#include "text/tokenizer.h"

namespace beam::server {

struct OutputToken {
  int32_t id = 0;
  std::optional<TokenLogprobs> logprobs;
  std::optional<float> entropy;  // with SamplingParams::return_entropy
  std::vector<TokenLogprob> token_ids_logprobs;  // with SamplingParams::token_ids_logprob
};

// What one batch of tokens released. `parts` holds reasoning / content / tool-call deltas (with
// parse_output off: content only). The sibling's first delta of a GenerationSpec::prompt_logprobs
// request carries the prompt's logprobs (TokenEvent::prompt_logprobs).
struct SiblingDelta {
  std::vector<ResponseDelta> parts;
  std::vector<OutputToken> tokens;
  std::vector<TokenLogprobs> prompt_logprobs;
  int64_t retractions =
      0;  // the sibling's Usage::retractions so far (not content: empty() ignores it)
  SequenceTimes times;  // the sibling's Usage::times so far (not content either)
  bool empty() const { return parts.empty() && tokens.empty() && prompt_logprobs.empty(); }
};

struct SiblingResult {
  FinishReason reason = FinishReason::kStop;
  // index into GenerationSpec::stop_strings, then stop_regexes (stop_strings.size() + i)
  std::optional<size_t> stop_string;
  std::optional<int32_t> stop_token;   // the stop/eos id that ended it
  ParsedResponse parsed;               // reasoning, content, tool calls (content only if unparsed)
  std::vector<OutputToken> tokens;     // every kept token, in order
  int64_t completion_tokens = 0;       // == tokens.size()
  std::string error;                   // with kError
  // With GenerationSpec::return_routed_experts: [positions, sparse layers, top_k] expert ids of
  // positions [routed_experts_start, every token the model read) (TokenEvent::routed_experts).
  std::optional<std::vector<int32_t>> routed_experts;
  // With GenerationSpec::return_hidden_states: the final hidden states of every position the
  // model read (TokenEvent::hidden_states), hidden_size wide.
  std::optional<HiddenStateRows> hidden_states;
  // With GenerationSpec::prompt_logprobs: prompt positions [start, prompt length).
  std::vector<TokenLogprobs> prompt_logprobs;
  int64_t retractions = 0;  // Usage::retractions at its last engine event
  SequenceTimes times;      // Usage::times at its last engine event
  int64_t spec_verifications = 0;  // Usage::spec_verifications at the end (0 when cancelled)
};

class SiblingDecoder {
 public:
  // `tokenizer` may be null only when spec.detokenize is false; `response_template` is used when
  // spec.parse_output. Both must outlive the decoder.
  SiblingDecoder(const text::Tokenizer* tokenizer, const GenerationSpec& spec,
                 std::shared_ptr<const ResponseTemplate> response_template);

  // Consumes the tokens of one engine event (ignored once the sibling is done).
  void on_tokens(const TokenEvent& event, SiblingDelta* out);
  // True once a stop string ended the output (the engine may still be generating).
  bool stopped_by_string() const { return stop_string_.has_value(); }
  bool done() const { return done_; }

  // Ends the sibling: flushes held-back text. `engine_final` is the engine's finishing event, or
  // null when a stop string ended it (routing replay waits for the engine's final event then).
  SiblingResult finish(const TokenEvent* engine_final, SiblingDelta* out);

 private:
  struct PendingToken {
    OutputToken token;
    size_t text_start = 0;  // offset in the detokenized stream
    size_t text_end = 0;
  };

  bool shows(int32_t id) const;  // false: a special token that is not shown as text
  // The engine read past a stop string's last kept token: the positions a finish at that token
  // would report (the prompt and the kept tokens but the last).
  int64_t kept_positions(const TokenEvent& engine_final) const;
  // The engine's per-position records for the result: all of them, or after a stop string those
  // of the kept positions.
  void take_records(const TokenEvent& engine_final, SiblingResult* result) const;
  void add_text(const std::string& text, SiblingDelta* out);
  void release_text(const std::string& text, SiblingDelta* out);
  void release_tokens(bool all, SiblingDelta* out);

  const text::Tokenizer* tokenizer_;
  const GenerationSpec& spec_;
  std::optional<text::IncrementalDetokenizer> detokenizer_;
  StopMatcher stop_matcher_;
  std::optional<ResponseStream> stream_;
  std::vector<PendingToken> pending_;
  std::vector<OutputToken> kept_;
  std::vector<TokenLogprobs> prompt_logprobs_;
  std::string content_;          // released text when not parsing
  size_t text_bytes_ = 0;        // detokenized so far
  size_t released_bytes_ = 0;    // released past the stop matcher
  std::optional<size_t> stop_string_;
  size_t stop_offset_ = 0;  // where the stopping text starts and ends in the output text
  size_t stop_end_ = 0;
  bool done_ = false;
  int64_t retractions_ = 0;  // the last engine event's Usage::retractions
  SequenceTimes times_;      // the last engine event's Usage::times
};

}  // namespace beam::server
