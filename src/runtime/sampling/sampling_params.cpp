// SamplingParams validation: one check per field, each error names the field, its value and the
// accepted range so an API layer can pass the message to the user unchanged.
#include "runtime/sampling/sampling_params.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "core/check.h"
#include "runtime/structured/output_constraint.h"

namespace beam {
namespace {

template <typename T>
Error param_error(const char* name, T value, const char* requirement) {
  std::ostringstream os;
  os << "sampling parameter '" << name << "' " << requirement << ", got " << value;
  return make_error(os.str());
}

Status check_token_id(const char* name, int64_t token, int64_t vocab_size) {
  if (token < 0 || token >= vocab_size) {
    std::ostringstream os;
    os << "sampling parameter '" << name << "' holds token id " << token
       << ", outside the vocabulary [0, " << vocab_size << ")";
    return make_error(os.str());
  }
  return ok_status();
}

Status validate_filters(const SamplingParams& p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0)
    return param_error("temperature", p.temperature, "must be a finite number >= 0 (0 = greedy)");
  if (p.top_k < -1) return param_error("top_k", p.top_k, "must be -1 or 0 (off) or >= 1");
  if (!(p.top_p > 0 && p.top_p <= 1)) return param_error("top_p", p.top_p, "must be in (0, 1]");
  if (!(p.min_p >= 0 && p.min_p <= 1)) return param_error("min_p", p.min_p, "must be in [0, 1]");
  return ok_status();
}

Status validate_penalties(const SamplingParams& p, int64_t vocab_size) {
  if (!std::isfinite(p.repetition_penalty) || !(p.repetition_penalty > 0))
    return param_error("repetition_penalty", p.repetition_penalty, "must be a finite number > 0");
  if (!(std::fabs(p.frequency_penalty) <= kMaxAbsOpenAiPenalty))
    return param_error("frequency_penalty", p.frequency_penalty, "must be in [-2, 2]");
  if (!(std::fabs(p.presence_penalty) <= kMaxAbsOpenAiPenalty))
    return param_error("presence_penalty", p.presence_penalty, "must be in [-2, 2]");
  for (const auto& [token, bias] : p.logit_bias) {
    BEAM_RETURN_IF_ERROR(check_token_id("logit_bias", token, vocab_size));
    if (!(std::fabs(bias) <= kMaxAbsLogitBias)) {
      std::string name = "logit_bias[" + std::to_string(token) + "]";
      return param_error(name.c_str(), bias, "must be in [-100, 100]");
    }
  }
  return ok_status();
}

Status validate_limits(const SamplingParams& p, int64_t vocab_size) {
  for (int32_t token : p.stop_token_ids)
    BEAM_RETURN_IF_ERROR(check_token_id("stop_token_ids", token, vocab_size));
  if (p.max_tokens && *p.max_tokens < 0)  // 0: the prompt only (prefill, prompt logprobs)
    return param_error("max_tokens", *p.max_tokens, "must be >= 0");
  if (p.min_tokens < 0) return param_error("min_tokens", p.min_tokens, "must be >= 0");
  if (p.max_tokens && p.min_tokens > *p.max_tokens)
    return param_error("min_tokens", p.min_tokens, "must be <= max_tokens");
  if (p.n < 1 || p.n > kMaxSiblings) return param_error("n", p.n, "must be in [1, 128]");
  if (p.top_logprobs < 0 || p.top_logprobs > kMaxTopLogprobs)
    return param_error("top_logprobs", p.top_logprobs, "must be in [0, 20]");
  if (p.top_logprobs > 0 && !p.logprobs)
    return param_error("top_logprobs", p.top_logprobs, "needs 'logprobs' to be true");
  if (static_cast<int64_t>(p.token_ids_logprob.size()) > kMaxTokenIdsLogprob)
    return param_error("token_ids_logprob", static_cast<int64_t>(p.token_ids_logprob.size()),
                       "holds at most 64 ids");
  for (int32_t token : p.token_ids_logprob)
    BEAM_RETURN_IF_ERROR(check_token_id("token_ids_logprob", token, vocab_size));
  return ok_status();
}

Status validate_constraint(const SamplingParams& p, int64_t vocab_size) {
  if (!p.constraint) return ok_status();
  BEAM_CHECK((p.constraint->grammar || p.constraint->regex || p.constraint->ebnf) &&
             p.constraint->vocab)
      << "constraint without grammar, regex, ebnf or vocab";
  if (p.constraint->vocab->vocab_size() != vocab_size) {
    std::ostringstream os;
    os << "the output constraint was built for a vocabulary of "
       << p.constraint->vocab->vocab_size() << " tokens, the model has " << vocab_size;
    return make_error(os.str());
  }
  if (p.ignore_eos)
    return make_error(
        "sampling parameter 'ignore_eos' cannot be combined with a structured output "
        "format: the output ends where the format's text is complete");
  if (p.min_tokens > 0)
    return param_error("min_tokens", p.min_tokens,
                       "must be 0 with a structured output format (the format decides the length)");
  return ok_status();
}

Status validate_reasoning_budget(const SamplingParams& p, int64_t vocab_size) {
  if (!p.reasoning_budget) return ok_status();
  const ReasoningBudget& b = *p.reasoning_budget;
  if (b.max_tokens < 0) return param_error("reasoning_budget", b.max_tokens, "must be >= 0 tokens");
  if (b.end_tokens.empty())
    return make_error("sampling parameter 'reasoning_budget' needs the tokens that end reasoning");
  for (int32_t token : b.end_tokens)
    BEAM_RETURN_IF_ERROR(check_token_id("reasoning_budget", token, vocab_size));
  if (b.start_token)
    BEAM_RETURN_IF_ERROR(check_token_id("reasoning_budget", *b.start_token, vocab_size));
  return ok_status();
}

Status validate_token_filters(const SamplingParams& p, int64_t vocab_size) {
  for (int32_t token : p.allowed_token_ids)
    BEAM_RETURN_IF_ERROR(check_token_id("allowed_token_ids", token, vocab_size));
  for (const std::vector<int32_t>& word : p.bad_words_token_ids) {
    if (word.empty()) return make_error("sampling parameter 'bad_words' holds an empty word");
    for (int32_t token : word) BEAM_RETURN_IF_ERROR(check_token_id("bad_words", token, vocab_size));
  }
  const auto banned = [&](int32_t token) {  // by a one-token word: always
    for (const std::vector<int32_t>& word : p.bad_words_token_ids)
      if (word.size() == 1 && word[0] == token) return true;
    return false;
  };
  if (!p.allowed_token_ids.empty() &&
      std::all_of(p.allowed_token_ids.begin(), p.allowed_token_ids.end(), banned))
    return make_error("sampling parameter 'bad_words' bans every token of allowed_token_ids");
  return ok_status();
}

}  // namespace

std::optional<LogprobsMode> parse_logprobs_mode(std::string_view name) {
  if (name == "scaled") return LogprobsMode::kScaled;
  if (name == "raw" || name == "raw_logprobs") return LogprobsMode::kRaw;
  return std::nullopt;
}

Status SamplingParams::validate(int64_t vocab_size) const {
  BEAM_CHECK(vocab_size > 0) << "vocab_size " << vocab_size;
  BEAM_RETURN_IF_ERROR(validate_filters(*this));
  BEAM_RETURN_IF_ERROR(validate_penalties(*this, vocab_size));
  BEAM_RETURN_IF_ERROR(validate_limits(*this, vocab_size));
  BEAM_RETURN_IF_ERROR(validate_constraint(*this, vocab_size));
  BEAM_RETURN_IF_ERROR(validate_reasoning_budget(*this, vocab_size));
  BEAM_RETURN_IF_ERROR(validate_token_filters(*this, vocab_size));
  return ok_status();
}

}  // namespace beam
