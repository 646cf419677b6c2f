// Prompt-only engine requests whose output is final hidden states, shared by the pooling family
// of endpoints (/v1/embeddings, /pooling, /score, /rerank): one request per prompt (max_tokens 0),
// each recording its last position's state (vLLM's LAST pooling) or every position's (ALL).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "server/api/endpoint_env.h"
#include "server/api/hidden_states.h"
#include "server/openai/completion_request.h"

namespace beam::server {

enum class Pooling { kLast, kAll };

// The most values (rows x hidden size) one response may pool: 64 MiB as float32, about 10x that
// as JSON text.
inline constexpr int64_t kMaxPooledValues = int64_t{16} << 20;

struct PoolingJob {
  std::vector<std::vector<int32_t>> prompts;  // token ids, before truncation
  std::vector<std::string> keys;  // per prompt: the request field its errors name ("input[2]")
  std::string lora_name;          // "" for the base model
  int32_t priority = 0;
  std::optional<int64_t> truncate_prompt_tokens;  // vLLM's (prompt_truncation.h)
  Pooling pooling = Pooling::kLast;
  std::string field = "input";  // the request's prompts field, named by whole-request errors
};

// Appends `prompts` (their token ids) to the job, each named `key`, or key[i] when there are
// several.
ApiExpected<bool> add_prompt_ids(const ServedModel& model,
                                 const std::vector<CompletionPrompt>& prompts,
                                 const std::string& key, PoolingJob* job);

// Called once every prompt's states are in: states[i] holds prompt i's rows (one for kLast,
// one per kept prompt token for kAll); usage counts the prompt tokens computed or reused.
using PooledStatesReady =
    std::function<void(std::vector<HiddenStateRows> states, const GenerationUsage& usage)>;

// Validates the job (truncation, the prompts' lengths, kMaxPooledValues) and launches its engine
// requests; `ready` runs on the engine's completion, unless a request failed or was cancelled,
// which answers the exchange with the error instead. Errors before launch come back as values.
ApiExpected<bool> launch_pooling(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange,
                                 PoolingJob job, PooledStatesReady ready);

// A row's values as floats, divided by their L2 norm when `normalize` (torch's F.normalize: by
// max(norm, 1e-12)).
std::vector<float> pooled_vector(std::span<const uint16_t> state, bool normalize);

// The vector as a JSON array, or its little-endian float32 bytes in base64 (OpenAI's
// encoding_format "base64").
Json float_vector_json(const std::vector<float>& values, bool base64);

// The pooling endpoints' usage: {"prompt_tokens", "total_tokens"} (nothing is generated).
Json pooled_usage_json(const GenerationUsage& usage);

// The cosine similarity of two rows (0 when either is all zeros), in double precision.
double cosine_similarity(std::span<const uint16_t> a, std::span<const uint16_t> b);

}  // namespace beam::server
