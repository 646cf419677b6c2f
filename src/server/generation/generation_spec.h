// GenerationSpec: what an endpoint asks of one engine request once its JSON is parsed and its
// prompt rendered — token ids, sampling, stop strings, and how the output text is post-processed.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/sampling/sampling_params.h"
#include "server/api/response_format.h"
#include "server/api/stop_regex.h"

namespace beam::server {

struct GenerationSpec {
  std::string rid;  // SGLang's request id (POST /abort_request names it); "": none
  std::vector<int32_t> prompt_ids;
  std::string prompt_text;               // the rendered prompt; output parsing starts from its end
  SamplingParams sampling;
  std::vector<std::string> stop_strings;  // non-empty strings, matched on the output text
  std::vector<StopRegex> stop_regexes;    // SGLang's stop_regex: searched in the output text too
  bool include_stop_str_in_output = false;  // also keeps the text of a stop id that ended the output
  bool parse_output = false;             // chat-style: response_template → reasoning/content/tools
  nlohmann::ordered_json tools;          // OpenAI tools array for argument casting (null: none)
  bool parse_tool_calls = true;          // false (tool_choice "none"): tool-call text is content
  std::string tool_call_id_prefix = "call_";  // tool-call ids: prefix + index in the response
  bool detokenize = true;                // false: token ids only (/generate without a tokenizer)
  bool skip_special_tokens = true;
  std::vector<int32_t> shown_special_ids;  // special tokens kept despite skip_special_tokens
  int32_t priority = 0;
  std::string cache_salt;  // GenerateRequest::cache_salt
  std::string lora_name;   // GenerateRequest::lora_name (served_model.h's model_adapter)
  // The request field that named lora_name: a 404 on it when the adapter is unloaded between the
  // endpoint's check and the engine's submit ("model"; SGLang's "lora_path").
  std::string lora_param = "model";
  std::optional<int> data_parallel_rank;  // GenerateRequest::data_parallel_rank
  // tool_choice required / named under constrained decoding (tool_call_format.h); text: none.
  ResponseFormat tool_format;
  // Routing replay (read_routed_experts_fields, sampling_fields.h): each choice's routed
  // experts from position routed_experts_start on, routed_experts_per_position ids a position
  // (sparse layers x top_k; a stop string's output keeps those of its kept tokens).
  bool return_routed_experts = false;
  int64_t routed_experts_start = 0;
  int64_t routed_experts_per_position = 0;
  // SGLang's return_hidden_states: each choice's final hidden states (TokenEvent::hidden_states)
  // from position hidden_states_start on, rows of hidden_size values (a stop string's output
  // keeps those of its kept tokens).
  bool return_hidden_states = false;
  int64_t hidden_size = 0;
  int64_t hidden_states_start = 0;
  // The choices' results wait for the engine's final event, which carries these records.
  bool reports_positions() const { return return_routed_experts || return_hidden_states; }
  // Logprobs of prompt positions [start, prompt length) (GenerateRequest::prompt_logprobs), on each
  // sibling's first delta and in its result; with them sampling.max_tokens may be 0 (score only).
  std::optional<PromptLogprobsOptions> prompt_logprobs;
};

}  // namespace beam::server
