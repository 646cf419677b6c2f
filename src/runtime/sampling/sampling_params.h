// SamplingParams: what one request asks of the sampler (logit processing, seed, logprobs) and of
// the finish checks (stop ids, token limits), validated against the model's vocabulary.
// Semantics of every field and the processing order: docs/sampling.md.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace beam {

struct OutputConstraint;  // runtime/structured/output_constraint.h

inline constexpr int64_t kMaxTopLogprobs = 20;   // OpenAI's limit on top_logprobs
inline constexpr int64_t kMaxTokenIdsLogprob = 64;  // SamplingParams::token_ids_logprob's ids
inline constexpr int64_t kMaxSiblings = 128;     // largest n (OpenAI's limit)
inline constexpr double kMaxAbsLogitBias = 100;  // OpenAI's logit_bias range [-100, 100]
inline constexpr double kMaxAbsOpenAiPenalty = 2;  // frequency/presence penalty range [-2, 2]

// What logprobs are of (docs/sampling.md): log_softmax of the soft-capped logits divided by the
// temperature (kScaled), or of the logits as they are, T = 1 whatever the temperature (kRaw,
// vLLM's raw_logprobs). Both before logit_bias, penalties, masks and top-k / top-p / min-p.
enum class LogprobsMode : uint8_t { kScaled, kRaw };

// "scaled", or "raw" / "raw_logprobs" (vLLM's name); nullopt for anything else.
std::optional<LogprobsMode> parse_logprobs_mode(std::string_view name);

// A cap on a reasoning model's thinking (vLLM's thinking_token_budget, SGLang's thinking_budget,
// Anthropic's thinking.budget_tokens; docs/sampling.md): once the reasoning holds max_tokens
// tokens, end_tokens are forced one by one, which closes it. The reasoning starts when
// start_token is written (unset: at the output's first token) and ends early when the model
// writes end_tokens.back() itself.
struct ReasoningBudget {
  int64_t max_tokens = 0;              // >= 0
  std::vector<int32_t> end_tokens;     // non-empty, e.g. {</think>}
  std::optional<int32_t> start_token;  // e.g. <think>; unset: the output starts in the reasoning
};

struct SamplingParams {
  double temperature = 1.0;         // ≥ 0; 0 = greedy (argmax, ties → lowest id)
  int64_t top_k = 0;                // 0 or -1 = off; else ≥ 1 (k ≥ vocab keeps everything)
  double top_p = 1.0;               // (0, 1]; 1 = off
  double min_p = 0.0;               // [0, 1]; 0 = off
  double repetition_penalty = 1.0;  // > 0; 1 = off. HF: over prompt + output tokens
  double frequency_penalty = 0.0;   // [-2, 2]; OpenAI: over output tokens, × count
  double presence_penalty = 0.0;    // [-2, 2]; OpenAI: over output tokens, once per token
  std::map<int32_t, double> logit_bias;  // token id → bias in [-100, 100], added first
  std::optional<uint64_t> seed;          // absent: a random seed is drawn at request creation
  std::vector<int32_t> stop_token_ids;   // finish with "stop" after any of these (kept in ids)
  std::optional<int64_t> max_tokens;     // ≥ 0 (0: the prompt is computed, nothing generated);
                                         // absent = until the context limit
  int64_t min_tokens = 0;                // ≥ 0, ≤ max_tokens: eos/stop ids masked before that
  bool ignore_eos = false;               // eos neither stops nor is masked
  int64_t n = 1;                         // [1, 128] sibling sequences sharing the prompt
  bool logprobs = false;                 // return the chosen token's logprob
  int64_t top_logprobs = 0;              // [0, 20] alternatives per token; needs logprobs
  LogprobsMode logprobs_mode = LogprobsMode::kScaled;  // output and prompt logprobs
  // Each output token's entropy (distribution_entropy of its logits row at logprob_temperature():
  // the distribution the logprobs describe), for RL trainers' entropy terms (SGLang's
  // return_entropy). Independent of logprobs.
  bool return_entropy = false;
  // Each output token's logprobs of these ids (SGLang's token_ids_logprob: e.g. P("yes") for a
  // generative reward), under the same distribution as the logprobs; at most
  // kMaxTokenIdsLogprob ids, each in [0, vocab).
  std::vector<int32_t> token_ids_logprob;
  // Constrained decoding (JSON of a schema): the tokens allowed next, applied before every logit
  // processor; null = free output. Excludes ignore_eos and min_tokens (docs/structured_output.md).
  std::shared_ptr<const OutputConstraint> constraint;
  std::optional<ReasoningBudget> reasoning_budget;  // unset: the reasoning is not capped
  // Token filters (vLLM's), applied as the allowed-token mask with the constraint's: only these
  // ids may be sampled (empty: every id); and bad words as token sequences, the last token of
  // each masked wherever the output ends with the ones before it (a one-token word: always).
  std::vector<int32_t> allowed_token_ids;
  std::vector<std::vector<int32_t>> bad_words_token_ids;

  // An error naming the first invalid field, with its value and the allowed range.
  Status validate(int64_t vocab_size) const;

  bool is_greedy() const { return temperature == 0.0; }
  // The temperature logprobs are computed at: 1 when greedy or raw, else the temperature.
  double logprob_temperature() const {
    return is_greedy() || logprobs_mode == LogprobsMode::kRaw ? 1.0 : temperature;
  }
  bool top_k_active(int64_t vocab_size) const { return top_k > 0 && top_k < vocab_size; }
  bool has_token_filters() const {
    return !allowed_token_ids.empty() || !bad_words_token_ids.empty();
  }
  bool has_output_penalties() const {
    return frequency_penalty != 0.0 || presence_penalty != 0.0 || repetition_penalty != 1.0;
  }
};

}  // namespace beam
