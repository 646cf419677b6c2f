// SGLang's POST /generate request (GenerateReqInput + SamplingParams): telling it from the native
// /generate body, parsing it into one item per prompt, and the 400s naming what beamserve does not
// support (LoRA, images, custom logit processors, ...). docs/server.md, "SGLang's /generate".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/api/sampling_fields.h"
#include "server/generation/generation_spec.h"
#include "text/tokenizer.h"

namespace beam::server {

struct ServedModel;

// SGLang's default max_new_tokens (sampling_params.py).
inline constexpr int64_t kSglangDefaultMaxNewTokens = 128;

// True when the body is SGLang's format: it has `sampling_params` or `text`, or one of
// `return_logprob`, `top_logprobs_num`, `return_text_in_logprobs`.
bool is_sglang_generate_body(const Json& body);

// One prompt of the request with its own sampling_params / logprob fields (SGLang lets each of
// them be a list over a batch).
struct SglangItem {
  std::vector<int32_t> prompt_ids;
  SamplingFields sampling;  // max_tokens clamped to the context, as SGLang does
  bool return_logprob = false;
  bool return_entropy = false;  // meta_info output_token_entropy: each output token's entropy
  // With return_logprob: meta_info output_token_ids_logprobs, these ids' logprobs a token.
  std::vector<int32_t> token_ids_logprob;
  int64_t logprob_start = 0;       // resolved: -1 → prompt length - 1; < prompt length
  int64_t top_logprobs_num = 0;    // [0, 20]
  std::optional<std::string> rid;  // meta_info.id (n == 1 only); absent: a generated id
  std::string lora_path;           // SGLang's lora_path: a loaded adapter's name or path ("": none)
};

struct SglangGenerateRequest {
  std::string model;
  std::vector<SglangItem> items;
  int64_t n = 1;       // the same for every item, as SGLang requires
  bool batch = false;  // the response is a list: a batch input, or n > 1
  bool stream = false;
  bool return_text_in_logprobs = false;
};

// What parsing needs from the model.
struct SglangModelInfo {
  const text::Tokenizer* tokenizer = nullptr;  // null: `text` input and stop strings are 400s
  int64_t vocab_size = 0;
  int64_t max_context_tokens = 0;           // prompt + output; 0: no clamping
  Json sampling_defaults = Json::object();  // generation_config.json's (apply_sampling_defaults)
  FormatCaches format_caches;               // compiled output formats by text (none: each compiles)
};

ApiExpected<SglangGenerateRequest> parse_sglang_generate_request(const Json& body,
                                                                 const SglangModelInfo& model);

// The engine request of item `item` (finish_spec's checks included): prompt logprobs from
// logprob_start + 1 when logprobs are asked for (max_new_tokens 0: the prompt only, as SGLang).
ApiExpected<GenerationSpec> sglang_generation_spec(const ServedModel& model,
                                                   const SglangItem& item);

}  // namespace beam::server
