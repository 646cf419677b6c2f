// Logprobs of a token and of the top-n alternatives, computed from one raw logits row:
// log_softmax(logits / T) of the soft-capped model logits, T = temperature (0 → 1), i.e. BEFORE
// logit_bias, penalties and top-k/top-p/min-p. Two passes over the row, no copy of it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace beam {

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;  // may be -inf when the probability underflows (tiny temperature)
};

struct TokenLogprobs {
  TokenLogprob chosen;
  int64_t chosen_rank = 0;        // 1 = the most likely token (ties → lower id ranks first)
  std::vector<TokenLogprob> top;  // the num_top most likely, best first (ties → lower id)
  // Prompt logprobs only: PromptLogprobsOptions::token_ids' logprobs at this position, in order.
  std::vector<TokenLogprob> token_ids;
};

// One logits row to score (prompt logprobs): the logprobs of a given token, not a drawn one.
struct ScoreRow {
  int64_t logits_row = 0;    // row of the step's [rows, vocab] logits
  int32_t token = 0;         // [0, vocab)
  double temperature = 0.0;  // the request's temperature (0 → 1), as for output logprobs
  int64_t num_top = 0;       // [0, kMaxTopLogprobs]
};

// logits: [vocab] f32 soft-capped logits; token in [0, vocab); num_top in [0, vocab].
TokenLogprobs compute_logprobs(std::span<const float> logits, int32_t token, double temperature,
                               int64_t num_top);

// log_softmax(logits / T) of each of `ids` (T = temperature, 0 → 1), as compute_logprobs gives
// a chosen token's: one max pass and one exp-sum pass for all of them. ids in [0, vocab).
std::vector<TokenLogprob> logprobs_of(std::span<const float> logits,
                                      std::span<const int32_t> ids, double temperature);

// The entropy in nats of the distribution the logprobs above describe, softmax(logits / T)
// (T = temperature, 0 → 1): log S − Σ w·x / S over x = f32((v − max) · f32(1 / T)), w = exp(x),
// S = Σ w (the weights the logprobs' sum takes; sums in double). In [0, log vocab].
// logits: [vocab] f32 with a finite maximum.
double distribution_entropy(std::span<const float> logits, double temperature);

}  // namespace beam
