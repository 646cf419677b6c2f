// POST /v1/embeddings request (OpenAI's, with vLLM's extras) and vLLM's POST /pooling (the same
// fields and `task`): JSON → EmbeddingsRequest. Every error is a 400 naming the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/api/api_error.h"
#include "server/api/chat_prompt.h"
#include "server/api/json_fields.h"
#include "server/openai/completion_request.h"
#include "server/openai/pooled_states.h"

namespace beam::server {

enum class PooledEndpoint { kEmbeddings, kPooling };

struct EmbeddingsRequest {
  PooledEndpoint endpoint = PooledEndpoint::kEmbeddings;
  // /pooling's `task`: "token_embed" (or vLLM's older "encode"; the default) pools every
  // position (kAll), "embed" the last; /v1/embeddings always the last.
  Pooling pooling = Pooling::kLast;
  std::string model;
  std::vector<CompletionPrompt> inputs;  // `input`: a string, token ids, or a list of either
  // Or vLLM's chat form, `messages` (one conversation rendered by the chat template; its
  // add_generation_prompt defaults to false, as vLLM's), with chat_template_kwargs and
  // continue_final_message. Exactly one of `input` and `messages`.
  std::optional<ChatPrompt> chat;
  bool base64 = false;  // encoding_format "base64": each vector's float32 bytes (little-endian)
  std::optional<int64_t> dimensions;  // OpenAI's: the served model's hidden size or absent
  bool normalize = true;  // vLLM's: L2-normalized (the default) or the raw final hidden state
  std::optional<int64_t> truncate_prompt_tokens;  // vLLM's (prompt_truncation.h)
  int32_t priority = 0;                           // vLLM's request priority
};

ApiExpected<EmbeddingsRequest> parse_embeddings_request(const Json& body,
                                                       PooledEndpoint endpoint);

}  // namespace beam::server
