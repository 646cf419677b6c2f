// Sparse logit edits: each touched token is changed once, by a function of its own logit and
// counts only, so the result does not depend on hash-map iteration order.
#include "runtime/sampling/logit_processors.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace beam {
namespace {

int32_t count_in(std::span<const int32_t> tokens, int32_t token) {
  return static_cast<int32_t>(std::count(tokens.begin(), tokens.end(), token));
}

// True for the first occurrence of tokens[i] within tokens (dedups the pending tokens).
bool first_occurrence(std::span<const int32_t> tokens, size_t i) {
  return std::find(tokens.begin(), tokens.begin() + i, tokens[i]) == tokens.begin() + i;
}

float& logit_of(std::span<TokenCandidate> row, int32_t token) {
  BEAM_CHECK(token >= 0 && static_cast<size_t>(token) < row.size()) << "token " << token;
  TokenCandidate& c = row[static_cast<size_t>(token)];
  BEAM_CHECK_EQ(c.id, token) << "logit processors need the row in token order";
  return c.value;
}

// HF repetition penalty: a positive logit is divided by p, a non-positive one multiplied by p.
void apply_repetition(std::span<TokenCandidate> row, const SequenceSamplingState& seq,
                      std::span<const int32_t> pending, double penalty) {
  auto penalize = [&](int32_t token) {
    float& v = logit_of(row, token);
    double d = v;
    v = static_cast<float>(d > 0 ? d / penalty : d * penalty);
  };
  for (int32_t token : seq.prompt_token_set()) penalize(token);
  for (const auto& [token, count] : seq.output_counts())
    if (!seq.prompt_contains(token)) penalize(token);
  for (size_t i = 0; i < pending.size(); ++i) {
    int32_t token = pending[i];
    if (first_occurrence(pending, i) && !seq.prompt_contains(token) &&
        !seq.output_counts().contains(token))
      penalize(token);
  }
}

// OpenAI penalties: logit -= frequency * count + presence * (count > 0), over output tokens.
void apply_frequency_presence(std::span<TokenCandidate> row, const SequenceSamplingState& seq,
                              std::span<const int32_t> pending) {
  const SamplingParams& p = seq.params();
  auto penalize = [&](int32_t token, int32_t count) {
    float& v = logit_of(row, token);
    double d = static_cast<double>(v) - p.frequency_penalty * count - p.presence_penalty;
    v = static_cast<float>(d);
  };
  for (const auto& [token, count] : seq.output_counts())
    penalize(token, count + count_in(pending, token));
  for (size_t i = 0; i < pending.size(); ++i) {
    int32_t token = pending[i];
    if (first_occurrence(pending, i) && !seq.output_counts().contains(token))
      penalize(token, count_in(pending, token));
  }
}

}  // namespace

void apply_logit_processors(std::span<TokenCandidate> row, const SequenceSamplingState& seq,
                            std::span<const int32_t> pending_tokens) {
  BEAM_CHECK_EQ(static_cast<int64_t>(row.size()), seq.vocab_size());
  const SamplingParams& p = seq.params();
  for (const auto& [token, bias] : p.logit_bias) {
    float& v = logit_of(row, token);
    v = static_cast<float>(static_cast<double>(v) + bias);
  }
  int64_t num_out = seq.num_output_tokens() + static_cast<int64_t>(pending_tokens.size());
  if (num_out < p.min_tokens)
    for (int32_t token : seq.min_tokens_masked_ids()) logit_of(row, token) = -INFINITY;
  if (p.repetition_penalty != 1.0) apply_repetition(row, seq, pending_tokens, p.repetition_penalty);
  if (p.frequency_penalty != 0.0 || p.presence_penalty != 0.0)
    apply_frequency_presence(row, seq, pending_tokens);
}

}  // namespace beam
