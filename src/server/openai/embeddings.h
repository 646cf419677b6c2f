// POST /v1/embeddings (OpenAI's API as vLLM serves it for decoder models): each input's (or the
// chat-form request's rendered conversation's) embedding is the final hidden state at its last
// token (vLLM's LAST pooling), L2-normalized unless the request says `normalize: false`.
// POST /pooling (vLLM's): the same request with `task`: "token_embed" (the default) answers every
// position's final hidden state, "embed" the embedding. One prompt-only engine request per
// distinct input (pooled_states.h; a cached prefix is reused); no server flag needed.
#pragma once

#include <memory>

#include "server/api/endpoint_env.h"

namespace beam::server {

void handle_embeddings(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
void handle_pooling(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);

}  // namespace beam::server
