// The logit processors that run before temperature, in this order: logit_bias, min_tokens
// masking, repetition penalty, frequency penalty, presence penalty (docs/sampling.md).
#pragma once

#include <cstdint>
#include <span>

#include "runtime/sampling/sequence_sampling_state.h"
#include "runtime/sampling/token_candidate.h"

namespace beam {

// Edits row [vocab] in place (row[i].id == i: still in token order). Counts come from `seq`
// (committed output) plus `pending_tokens`: tokens after the committed output that precede this
// row (speculative verification), not yet appended to `seq`. Touches only the tokens named by
// the params and the counts, never the whole row.
void apply_logit_processors(std::span<TokenCandidate> row, const SequenceSamplingState& seq,
                            std::span<const int32_t> pending_tokens);

}  // namespace beam
