// POST /v1/chat/completions request: JSON → ChatRequest (conversation in chat-template form,
// tools and tool_choice, sampling, streaming and logprob options). Every error is a 400 naming
// the field. The message/tool/tool_choice converters are shared with /v1/responses.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "server/api/chat_prompt.h"
#include "server/api/json_fields.h"
#include "server/api/sampling_fields.h"
#include "server/openai/beam_search_fields.h"
#include "server/openai/output_fields.h"

namespace beam::server {

struct ChatRequest {
  std::string model;
  ChatPrompt prompt;
  ToolChoice tool_choice;
  SamplingFields sampling;   // max_tokens from max_completion_tokens or max_tokens
  bool stream = false;
  OutputFields output;  // stream_options, return_token_ids
  BeamSearchFields beam;  // vLLM's use_beam_search, length_penalty
  // vLLM's prompt_logprobs: [0, 20] alternatives per position of the rendered prompt (not with
  // stream); with it the output limit may be 0.
  std::optional<int64_t> prompt_logprobs;
  bool tokens_as_ids = false;  // vLLM's return_tokens_as_token_ids: logprobs say "token_id:<id>"
  // vLLM's: only the rendered prompt's last k tokens are kept (prompt_truncation.h).
  std::optional<int64_t> truncate_prompt_tokens;
  const char* max_tokens_field = "max_tokens";  // or "max_completion_tokens", for errors
};

// Compiled output formats come from `caches` when they hold the text (format_caches).
ApiExpected<ChatRequest> parse_chat_request(const Json& body, const FormatCaches& caches);

// OpenAI chat messages → chat-template messages (text parts joined, tool-call arguments parsed
// to objects, developer → system, reasoning → reasoning_content).
ApiExpected<Json> convert_openai_messages(const Json& messages, const std::string& path);
// "none" | "auto" | "required" | {"type": "function", "function": {"name"}} (or {"type":
// "function", "name"} as /v1/responses writes it). Null → auto.
ApiExpected<ToolChoice> parse_openai_tool_choice(const Json* value, const std::string& path);
// Text or an array of text parts → one string.
ApiExpected<std::string> content_text(const Json& content, const std::string& path);
// chat_template_kwargs (object) and reasoning_effort (string) → template variables.
void read_template_variables(FieldReader& r, Json* variables);
// vLLM's chat_template (the request's own template source) and documents (a list of objects of
// strings, the template's `documents` variable) into *prompt.
void read_request_template(FieldReader& r, ChatPrompt* prompt);
// vLLM's add_generation_prompt and continue_final_message (not both true) into *prompt.
void read_generation_prompt_fields(FieldReader& r, ChatPrompt* prompt);

}  // namespace beam::server
