// beamserve's native endpoints: POST /tokenize (text or a chat conversation → ids), POST
// /detokenize (ids → text), and POST /generate (token ids in, token ids + logprobs out, optionally
// streamed) for RL trainers and tools that manage their own prompts.
#pragma once

#include <memory>

#include "server/api/endpoint_env.h"

namespace beam::server {

void handle_tokenize(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
void handle_detokenize(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
void handle_generate(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);

}  // namespace beam::server
