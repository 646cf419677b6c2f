// POST /v1/responses request: input (text or items: messages, function_call, function_call_output,
// reasoning), instructions, flat function tools, tool_choice, reasoning.effort, sampling →
// ResponsesRequest. Stateless: previous_response_id is rejected.
#pragma once

#include <string>

#include "server/api/chat_prompt.h"
#include "server/api/json_fields.h"
#include "server/api/sampling_fields.h"

namespace beam::server {

struct ResponsesRequest {
  std::string model;
  ChatPrompt prompt;
  ToolChoice tool_choice;
  SamplingFields sampling;
  bool stream = false;
  // Echoed in the response object.
  Json instructions = nullptr;
  Json tools = Json::array();       // as the client sent them (flat form)
  Json tool_choice_json = "auto";
  Json reasoning = nullptr;
  Json text_format = {{"type", "text"}};  // text.format as sent
};

// Compiled output formats come from `caches` when they hold the text (format_caches).
ApiExpected<ResponsesRequest> parse_responses_request(const Json& body, const FormatCaches& caches);

}  // namespace beam::server
