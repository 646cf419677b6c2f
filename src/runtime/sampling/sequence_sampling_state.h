// SequenceSamplingState: one sequence's sampling state — its validated params, its RNG stream,
// and token counts kept incrementally as output is committed (never rescanned per step).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "runtime/sampling/sampling_params.h"
#include "runtime/sampling/sampling_rng.h"
#include "runtime/structured/output_constraint.h"

namespace beam {

// The seed of a request: params.seed, else a fresh random one (std::random_device). Called once
// per request; every sibling uses the result, and the engine may report it back to the user.
uint64_t resolve_seed(const SamplingParams& params);

// What the engine knows about a sequence when it creates the sampling state.
struct SequenceSamplingSetup {
  std::shared_ptr<const SamplingParams> params;  // shared by the request's siblings
  uint64_t seed = 0;            // params->seed, else draw_random_seed() once per request
  int64_t sibling_index = 0;    // [0, params->n): picks the sibling's independent RNG stream
  std::span<const int32_t> prompt_tokens;
  std::span<const int32_t> eos_token_ids;  // the model's end-of-sequence set
  int64_t vocab_size = 0;
  int64_t max_context_tokens = 0;          // prompt + output may not exceed this
};

// Owner: the engine thread (create, append_output). Samplers on pool threads only read it, and
// only while the engine waits for the batch, so reads never race with append_output.
class SequenceSamplingState {
 public:
  // Validates params against the vocabulary and the prompt against the context limit.
  static Expected<SequenceSamplingState> create(const SequenceSamplingSetup& setup);

  // Records tokens committed to the output, in order (after the finish check truncated them).
  void append_output(std::span<const int32_t> tokens);

  const SamplingParams& params() const { return *params_; }
  const SamplingRng& rng() const { return rng_; }
  int64_t vocab_size() const { return vocab_size_; }
  int64_t num_prompt_tokens() const { return num_prompt_tokens_; }
  int64_t num_output_tokens() const { return num_output_tokens_; }
  // Most output tokens allowed: min(max_tokens, max_context_tokens - prompt tokens).
  int64_t output_limit_tokens() const { return output_limit_tokens_; }
  // Whether the finish at this limit comes from max_tokens (else from the context).
  bool limit_is_max_tokens() const { return limit_is_max_tokens_; }

  bool is_eos(int32_t token) const;
  bool is_stop_token(int32_t token) const;
  // Ids whose logits are -inf while fewer than min_tokens are out: stop ids and, unless
  // ignore_eos, the eos set. Sorted, distinct.
  std::span<const int32_t> min_tokens_masked_ids() const { return min_tokens_masked_; }
  // Distinct prompt tokens, sorted; filled only when repetition_penalty != 1.
  std::span<const int32_t> prompt_token_set() const {
    return prompt_set_ ? std::span<const int32_t>(*prompt_set_) : std::span<const int32_t>();
  }
  bool prompt_contains(int32_t token) const;
  // Output token → count; filled only when a penalty is active.
  const std::unordered_map<int32_t, int32_t>& output_counts() const { return output_counts_; }

  // Whether a mask decides the next token: params().constraint's (once its start token has been
  // written), the token filters' (allowed_token_ids, bad_words), or the reasoning budget's while
  // it forces the end of the reasoning.
  bool constrained() const { return needs_mask(false); }
  // constrained(), except that with bans_as_edits (the GPU sampler's sparse edits ban
  // banned_next()) bad_words alone need no mask.
  bool needs_mask(bool bans_as_edits) const {
    const SamplingParams& p = *params_;
    return forcing_reasoning_end() || (constraint_ && constraint_->active()) ||
           !p.allowed_token_ids.empty() || (!p.bad_words_token_ids.empty() && !bans_as_edits);
  }
  // The tokens bad_words ban next, after the output and then `pending` (earlier tokens of this
  // step): each word's last token where the text ends with the ones before it. Sorted, distinct.
  std::vector<int32_t> banned_next(std::span<const int32_t> pending = {}) const;
  // For a row whose bans are edits (needs_mask(true) false): the error fill_allowed_tokens would
  // give when the bans and min_tokens leave no token, else ok.
  Status check_bans_leave_a_token(std::span<const int32_t> pending = {}) const;
  // Needs constrained(): overwrites bits (allowed_mask_words(vocab_size()) words) with the
  // tokens allowed next — the next forced token that ends the reasoning, else the constraint's
  // (text that keeps a parse alive, and the eos and stop ids once it is complete) or every token,
  // less what the token filters and min_tokens take out. An error naming why when nothing is
  // allowed (an earlier token broke the constraint, or the filters leave no token).
  Status fill_allowed_tokens(std::span<uint32_t> bits, MaskScratch& scratch) const;
  // Whether positions after the output may need a mask or bans (a constraint, allowed_token_ids,
  // bad_words, a reasoning budget's forced end): a verification samples such a sequence's draft
  // positions from copies advanced over the drafts before them (their masks, bans, budget phase
  // and penalties), not with pending tokens.
  bool has_masks() const {
    const SamplingParams& p = *params_;
    return constraint_ || !p.allowed_token_ids.empty() || !p.bad_words_token_ids.empty() ||
           p.reasoning_budget.has_value();
  }
  // How many leading drafts the constraint, the token filters, min_tokens and a forced reasoning
  // end allow, each at its position after the drafts before it (a draft they refuse could never
  // be sampled there).
  int64_t allowed_drafts(std::span<const int32_t> drafts) const;
  // Tokens written inside the reasoning so far (with a reasoning budget).
  int64_t reasoning_tokens() const { return reasoning_tokens_; }
  bool forcing_reasoning_end() const { return budget_phase_ == BudgetPhase::kForcing; }

 private:
  // Where the output stands against params().reasoning_budget.
  enum class BudgetPhase : uint8_t {
    kNone,       // no budget, or the reasoning is over
    kBefore,     // waiting for the start token
    kReasoning,  // counting
    kForcing,    // writing end_tokens[forced_]
  };

  SequenceSamplingState(const SequenceSamplingSetup& setup);
  // Moves the budget's phase past one committed token.
  void advance_budget(int32_t token);

  std::shared_ptr<const SamplingParams> params_;
  SamplingRng rng_;
  int64_t vocab_size_ = 0;
  int64_t num_prompt_tokens_ = 0;
  int64_t num_output_tokens_ = 0;
  int64_t output_limit_tokens_ = 0;
  bool limit_is_max_tokens_ = false;
  std::vector<int32_t> eos_ids_;            // sorted, distinct
  std::vector<int32_t> stop_ids_;           // sorted, distinct
  std::vector<int32_t> min_tokens_masked_;  // sorted, distinct
  // Sorted, distinct; shared by copies (allowed_drafts, the engine's draft positions).
  std::shared_ptr<const std::vector<int32_t>> prompt_set_;
  std::unordered_map<int32_t, int32_t> output_counts_;
  std::vector<int32_t> end_ids_;  // eos and stop ids, sorted, distinct (with a constraint)
  std::vector<uint32_t> allowed_bits_;  // params' allowed_token_ids as a mask; empty: none
  std::vector<int32_t> recent_;  // with bad words: the last output tokens, up to the longest - 1
  std::optional<ConstraintState> constraint_;
  BudgetPhase budget_phase_ = BudgetPhase::kNone;
  int64_t reasoning_tokens_ = 0;
  size_t forced_ = 0;  // end tokens forced so far
};

}  // namespace beam
