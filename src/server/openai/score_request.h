// vLLM's POST /score (text pairs) and POST /rerank (a query against documents) requests: JSON →
// ScoreRequest / RerankRequest. Every error is a 400 naming the field. For a model without a
// classification head (Beam's) vLLM scores a pair by the cosine similarity of its embeddings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/api/api_error.h"
#include "server/api/json_fields.h"
#include "server/openai/completion_request.h"

namespace beam::server {

// The fields /score and /rerank share with vLLM's pooling requests.
struct PairScoringFields {
  std::string model;
  std::optional<int64_t> truncate_prompt_tokens;  // vLLM's (prompt_truncation.h)
  int32_t priority = 0;
};

struct ScoreRequest {
  PairScoringFields common;
  // text_1 and text_2: strings, token ids, or lists of either. One text_1 is scored against each
  // text_2; otherwise both lists have the same length and are scored pairwise.
  std::vector<CompletionPrompt> text_1, text_2;
};

struct RerankRequest {
  PairScoringFields common;
  CompletionPrompt query;              // a string or token ids
  std::vector<std::string> documents;  // strings or {"text": ...} objects (Cohere / Jina)
  std::optional<int64_t> top_n;        // the best top_n only; absent or 0: every document
  bool return_documents = true;        // each result's document: {"text": ...}
};

ApiExpected<ScoreRequest> parse_score_request(const Json& body);
ApiExpected<RerankRequest> parse_rerank_request(const Json& body);

}  // namespace beam::server
