// POST /v1/embeddings (OpenAI's API as vLLM serves it for decoder models): each input's (or the
// chat-form request's rendered conversation's) embedding is the final hidden state at its last
// token (vLLM's LAST pooling), L2-normalized unless the request says `normalize: false`. One
// prompt-only engine request per input (max_tokens 0, the last position's state only, so a cached
// prefix is reused up to it); no server flag needed.
#pragma once

#include <memory>

#include "server/api/endpoint_env.h"

namespace beam::server {

void handle_embeddings(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);

}  // namespace beam::server
