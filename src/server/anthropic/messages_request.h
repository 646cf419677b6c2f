// POST /v1/messages and /v1/messages/count_tokens requests (Anthropic Messages API): system,
// messages with text / tool_use / tool_result / thinking blocks, tools with input_schema,
// tool_choice, thinking → enable_thinking, stop_sequences, sampling → MessagesRequest.
#pragma once

#include <string>

#include "server/api/chat_prompt.h"
#include "server/api/json_fields.h"
#include "server/api/sampling_fields.h"

namespace beam::server {

struct MessagesRequest {
  std::string model;
  ChatPrompt prompt;
  ToolChoice tool_choice;
  SamplingFields sampling;
  bool stream = false;
};

// `count_only`: /v1/messages/count_tokens (max_tokens is not required). Compiled output formats
// come from `caches` when they hold the text (format_caches).
ApiExpected<MessagesRequest> parse_messages_request(const Json& body, bool count_only,
                                                    const FormatCaches& caches);

}  // namespace beam::server
