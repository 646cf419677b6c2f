// POST /v1/completions (legacy text completions): a raw prompt, or a list of them (text or token
// ids) → text, with legacy logprobs, echo and vLLM's prompt_logprobs; streamed as text_completion
// chunks. No chat template, no output parsing.
#pragma once

#include <memory>

#include "server/api/endpoint_env.h"
#include "server/openai/completion_request.h"

namespace beam::server {

void handle_completions(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);

// The token ids of one prompt: text tokenized by the model's tokenizer (a 400 without one), or
// ids checked against its vocabulary; `key` names the field in errors.
ApiExpected<std::vector<int32_t>> prompt_token_ids(const ServedModel& model,
                                                   const CompletionPrompt& p,
                                                   const std::string& key);

}  // namespace beam::server
