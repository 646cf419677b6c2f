// POST /v1/completions (legacy text completions): a raw prompt (text or token ids) → text, with
// legacy logprobs; streamed as text_completion chunks. No chat template, no output parsing.
#pragma once

#include <memory>

#include "server/api/endpoint_env.h"

namespace beam::server {

struct CompletionRequest {
  std::string model;
  std::optional<std::string> prompt_text;
  std::vector<int32_t> prompt_ids;  // when the prompt was given as token ids
  SamplingFields sampling;
  bool stream = false;
  bool include_usage = false;
};

ApiExpected<CompletionRequest> parse_completion_request(const Json& body);

void handle_completions(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);

}  // namespace beam::server
