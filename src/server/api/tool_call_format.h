// tool_choice "required" / a named function under constrained decoding: the tool call the
// assistant turn was opened with (chat_prompt.h's apply_tool_choice prefills the template's
// tool-call delimiter) is constrained to {"name": one of the offered functions, "arguments": JSON
// of its parameters' schema}, closed by the tool-call close token, and only more such calls (or
// none) may follow it (docs/structured_output.md).
#pragma once

#include <optional>
#include <string>

#include "server/api/json_fields.h"
#include "server/api/response_format.h"

namespace beam::server {

struct ServedModel;

// The JSON schema of one call of any of `tools` (OpenAI format): {"name": const, "arguments":
// parameters}, an anyOf over the tools when there are several; each tool's local "$ref"s are
// rewritten to point inside it.
Json tool_call_schema(const Json& tools);

// The format that constrains a required tool call of `tools` for `model`, when it can: the
// model's response template opens tool calls with a literal <X> and its tokenizer has <X> and </X>
// as added tokens, and every tool's parameters compile (JsonGrammar). Otherwise nullopt, and the
// call stays steered (the prefilled delimiter) rather than constrained. parallel: after a call
// the model may open another (<X>) before the turn ends; else the turn ends after the first.
std::optional<ResponseFormat> tool_call_format(const ServedModel& model, const Json& tools,
                                               bool parallel);

}  // namespace beam::server
