// Sampler: turns one logits row into a token for one sequence (allowed-token mask → logit
// processors → temperature → top-k → top-p → min-p → seeded draw, or argmax when greedy) plus
// logprobs when asked.
// One scratch row of vocab TokenCandidates per Sampler; no other full-vocab buffer.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "runtime/sampling/logprobs.h"
#include "runtime/sampling/sequence_sampling_state.h"
#include "runtime/sampling/token_candidate.h"

namespace beam {

// One row to sample. The token drawn is the sequence's output token number
// num_output_tokens() + pending_tokens.size() (0-based), which is also its RNG counter.
struct SampleRow {
  std::span<const float> logits;                // [vocab] f32, soft-capped model logits
  const SequenceSamplingState* seq = nullptr;   // read only
  std::span<const int32_t> pending_tokens = {}; // speculative: earlier tokens of this step
  // empty: every token; else [ceil(vocab/32)] words, token t allowed iff bit t % 32 of word t / 32
  std::span<const uint32_t> allowed_tokens = {};
};

struct SampledToken {
  int32_t token = -1;
  std::optional<TokenLogprobs> logprobs;  // present when params.logprobs
  std::optional<float> entropy;           // present when params.return_entropy
  std::vector<TokenLogprob> token_ids_logprobs;  // params.token_ids_logprob's, in their order
};

// Owner: one thread at a time (the scratch row is reused by every call).
class Sampler {
 public:
  explicit Sampler(int64_t vocab_size);

  SampledToken sample(const SampleRow& row);

 private:
  // Draws from the processed logits in scratch_ (token order on entry).
  int32_t draw(const SequenceSamplingState& seq, int64_t output_index);

  std::vector<TokenCandidate> scratch_;  // [vocab]
};

}  // namespace beam
