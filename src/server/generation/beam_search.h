// Beam search as vLLM's API runs it (use_beam_search): each step extends every live beam by its
// 2W most likely next tokens, then keeps the W best extensions by score; a beam that draws a stop
// id is complete. After max_tokens steps (or once no beam is live) the W best of the complete and
// live beams are the answer. score = cumulative logprob / (sequence length ^ length_penalty), the
// length counting the prompt's tokens and the beam's (less its stop id), as vLLM's
// get_beam_search_score. Pure bookkeeping: the caller computes each step's logprobs.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/sampling/logprobs.h"

namespace beam::server {

struct BeamSearchOptions {
  int64_t width = 1;        // W: beams kept, and answers returned
  int64_t max_tokens = 16;  // steps
  double length_penalty = 1.0;
  int64_t prompt_tokens = 0;      // counted in every beam's length
  std::vector<int32_t> stop_ids;  // ids that complete a beam (eos, stop_token_ids)
};

struct Beam {
  std::vector<int32_t> tokens;          // after the prompt; a complete beam ends with its stop id
  std::vector<TokenLogprobs> logprobs;  // per token: its logprob and its step's alternatives
  double cum_logprob = 0.0;
  bool stopped = false;  // ended by a stop id
};

class BeamSearch {
 public:
  explicit BeamSearch(BeamSearchOptions options);

  // The beams the next step extends (one empty beam before the first step).
  const std::vector<Beam>& live() const { return live_; }
  bool done() const { return live_.empty() || steps_ >= options_.max_tokens; }
  // The alternatives each step must report per live beam.
  int64_t candidates_per_beam() const { return 2 * options_.width; }

  // One step: next[i] holds live()[i]'s most likely next tokens (best first, at least
  // candidates_per_beam() where the vocabulary allows). Needs !done().
  void advance(const std::vector<TokenLogprobs>& next);

  // The answer: the W best of the complete and live beams, best first (equal scores: the earlier
  // found first).
  std::vector<Beam> best() const;

  double score(const Beam& beam) const;

 private:
  bool is_stop(int32_t id) const;
  double score_of(size_t tokens, double cum_logprob, bool stopped) const;

  BeamSearchOptions options_;
  std::vector<Beam> live_;
  std::vector<Beam> complete_;  // the W best complete beams, best first (ties: found first)
  int64_t steps_ = 0;
};

}  // namespace beam::server
