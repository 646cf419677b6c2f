// POST /v1/completions request: JSON → CompletionRequest (one prompt or a list of them, each text
// or token ids; sampling; legacy logprobs, echo and vLLM's prompt_logprobs,
// return_tokens_as_token_ids and truncate_prompt_tokens). Every error is a 400 naming the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/api/json_fields.h"
#include "server/api/sampling_fields.h"
#include "server/openai/beam_search_fields.h"
#include "server/openai/output_fields.h"

namespace beam::server {

// The most prompts one request may list (each is its own engine request).
inline constexpr size_t kMaxCompletionPrompts = 1024;

struct CompletionPrompt {
  std::optional<std::string> text;
  std::vector<int32_t> ids;  // when the prompt was given as token ids
};

// `key`'s value: a string, an array of token ids, or a list of either (a batch: one engine
// request each, at most kMaxCompletionPrompts); absent, empty or mistyped is a 400 naming `key`.
ApiExpected<std::vector<CompletionPrompt>> read_prompts(const Json* value, const std::string& key);

struct CompletionRequest {
  std::string model;
  std::vector<CompletionPrompt> prompts;  // non-empty; a list answers choices prompt-major
  SamplingFields sampling;  // max_tokens may be 0 with echo or prompt_logprobs (the prompt alone)
  bool echo = false;        // each choice's text (and logprobs) starts with its prompt's
  std::optional<int64_t> prompt_logprobs;  // vLLM's: [0, 20] alternatives per prompt position
  bool tokens_as_ids = false;  // vLLM's return_tokens_as_token_ids: logprobs say "token_id:<id>"
  // vLLM's: only each prompt's last k tokens are kept (prompt_truncation.h).
  std::optional<int64_t> truncate_prompt_tokens;
  bool stream = false;
  OutputFields output;  // stream_options, return_token_ids
  BeamSearchFields beam;  // vLLM's use_beam_search, length_penalty
};

// Compiled output formats come from `caches` when they hold the text (format_caches).
ApiExpected<CompletionRequest> parse_completion_request(const Json& body,
                                                        const FormatCaches& caches);

}  // namespace beam::server
