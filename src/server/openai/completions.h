// POST /v1/completions (legacy text completions): a raw prompt, or a list of them (text or token
// ids) → text, with legacy logprobs, echo and vLLM's prompt_logprobs; streamed as text_completion
// chunks. No chat template, no output parsing.
#pragma once

#include <memory>

#include "server/api/endpoint_env.h"
#include "server/openai/completion_request.h"

namespace beam::server {

void handle_completions(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);

}  // namespace beam::server
