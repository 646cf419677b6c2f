// Finish checks over the tokens of one step (one token, or several with speculative decoding):
// evaluated token by token so that ids, text, logprobs and KV are truncated at the same place.
// Stop STRINGS are matched on detokenized text by the server (docs/sampling.md, "Stop strings").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "runtime/sampling/sequence_sampling_state.h"

namespace beam {

// Why a sequence finished (what the engine reports; the API names come from finish_reason_name).
enum class FinishCause {
  kEos,           // an eos token (not ignore_eos)     → "stop"
  kStopTokenId,   // one of stop_token_ids              → "stop" (vLLM: stop_reason = the id)
  kMaxTokens,     // max_tokens output tokens           → "length"
  kContextLimit,  // prompt + output hit the context    → "length"
};

// The OpenAI/vLLM finish_reason string: "stop" or "length".
std::string_view finish_reason_name(FinishCause cause);

struct StepFinish {
  int64_t num_accepted = 0;            // keep step_tokens[0, num_accepted), drop the rest
  std::optional<FinishCause> cause;    // set when the sequence finished at the last kept token
  int32_t stop_token = -1;             // the token that stopped it (kEos, kStopTokenId)
};

// For token i of the step (output index k = seq.num_output_tokens() + i), in this order:
//  1. stop: if k >= min_tokens, a stop_token_id → kStopTokenId; else an eos id (unless
//     ignore_eos) → kEos. Before min_tokens these are ordinary tokens (the sampler masks them).
//  2. length: if k + 1 == seq.output_limit_tokens() → kMaxTokens or kContextLimit.
// The first token that finishes ends the step; it is kept (a stop token stays in the ids).
// Needs seq.num_output_tokens() < seq.output_limit_tokens(); does not modify seq.
StepFinish check_finish(const SequenceSamplingState& seq, std::span<const int32_t> step_tokens);

}  // namespace beam
