// vLLM's scoring endpoints for a model without a classification head: POST /score and /v1/score
// (text pairs) and POST /rerank, /v1/rerank and /v2/rerank (a query against documents, best
// first). A pair's score is the cosine similarity of the two texts' embeddings (their last final
// hidden states, as /v1/embeddings gives them), as vLLM scores with embedding models. Each
// distinct text is computed once (pooled_states.h).
#pragma once

#include <memory>

#include "server/api/endpoint_env.h"

namespace beam::server {

void handle_score(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
void handle_rerank(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);

}  // namespace beam::server
