// The sampling fields every generating endpoint accepts (OpenAI names plus the vLLM extensions
// top_k, min_p, repetition_penalty, min_tokens, stop_token_ids, ignore_eos, ...), read into
// SamplingParams and stop strings, and the checks that turn bad values into 400s naming the field.
#pragma once

#include <string>
#include <vector>

#include "runtime/sampling/sampling_params.h"
#include "server/api/json_fields.h"
#include "server/api/response_format.h"
#include "server/api/stop_regex.h"

namespace beam::server {

inline constexpr size_t kMaxStopStrings = 64;
inline constexpr size_t kMaxStopStringBytes = 1024;
inline constexpr size_t kMaxCacheSaltBytes = 1024;
inline constexpr size_t kMaxBadWords = 1024;
inline constexpr size_t kMaxBadWordBytes = 1024;

struct SamplingFields {
  SamplingParams params;
  std::vector<std::string> stop_strings;
  std::vector<StopRegex> stop_regexes;  // SGLang's stop_regex (read_stop_regexes)
  // vLLM's bad_words; finish_spec tokenizes them into params.bad_words_token_ids.
  std::vector<std::string> bad_words;
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;
  int32_t priority = 0;
  std::string cache_salt;  // prefix-cache namespace (GenerateRequest::cache_salt); "": none
  // The data-parallel replica to run on (read_data_parallel_rank; GenerateRequest's); unset: the
  // engine's load balancing picks.
  std::optional<int> data_parallel_rank;
  // Chat endpoints: most reasoning tokens (read_thinking_budget; Anthropic's
  // thinking.budget_tokens), and the field that set it; finish_spec turns it into
  // params.reasoning_budget.
  std::optional<int64_t> thinking_budget;
  std::string thinking_budget_field;
  // The endpoint's structured-output field (response_format, text.format); finish_spec turns it
  // into params.constraint.
  ResponseFormat format;
  // SGLang's routing replay fields (read_routed_experts_fields): return_routed_experts and
  // routed_experts_start_len.
  bool return_routed_experts = false;
  int64_t routed_experts_start = 0;
  // SGLang's return_hidden_states (read_routed_experts_fields too).
  bool return_hidden_states = false;
};

// Reads temperature, top_p, top_k, min_p, the penalties, seed, logit_bias, `stop_key` (a string
// or an array of strings; "stop" for OpenAI, "stop_sequences" for Anthropic), stop_token_ids,
// min_tokens, ignore_eos, logprobs_mode ("scaled" | "raw"), n, include_stop_str_in_output,
// skip_special_tokens, priority, cache_salt (vLLM's: a non-empty string), and vLLM's token
// filters allowed_token_ids (a non-empty array of ids) and bad_words (an array of strings).
// Token-limit and logprob fields differ per endpoint and are read by the caller.
void read_sampling_fields(FieldReader& r, const char* stop_key, SamplingFields* out);

// vLLM's request priority (lower runs earlier): an integer in int32's range, else the field fails.
void read_priority(FieldReader& r, int32_t* out);

// `key`: a regex or a list of them (at most kMaxStopStrings, each at most kMaxStopStringBytes),
// compiled to automata into *out; a pattern that does not compile or matches the empty text
// fails the field.
void read_stop_regexes(FieldReader& r, const char* key, std::vector<StopRegex>* out);

// vLLM's thinking_token_budget or SGLang's thinking_budget (one of them): the most tokens the
// model may reason before </think> is forced; -1: no limit.
void read_thinking_budget(FieldReader& r, SamplingFields* out);

// vLLM's data_parallel_rank or SGLang's routed_dp_rank (one of them, or both equal): a
// non-negative integer, or null for none; finish_spec checks it against the replicas.
void read_data_parallel_rank(FieldReader& r, std::optional<int>* out);

// A cache salt at `key` (a non-empty string of at most kMaxCacheSaltBytes) into *out.
void read_cache_salt(FieldReader& r, const char* key, std::string* out);

// return_routed_experts (bool), routed_experts_start_len (>= 0) and return_hidden_states (bool),
// for the endpoints that report what the model computed at each position (/generate,
// completions, chat completions).
void read_routed_experts_fields(FieldReader& r, SamplingFields* out);

// An array of non-negative token ids at `key` into *out (absent: unchanged); a 400 naming the
// key otherwise.
void read_token_ids(FieldReader& r, const char* key, std::vector<int32_t>* out);

// SamplingParams::validate against the vocabulary, as a 400 naming the field.
ApiExpected<bool> validate_sampling(const SamplingParams& params, int64_t vocab_size);

}  // namespace beam::server
