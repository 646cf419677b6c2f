// The response_template a model's output is parsed with: tokenizer_config.json's
// "response_template" when the checkpoint ships one, else beamserve's built-in template for the
// Qwen/Hermes layout (<think>…</think>, content, <tool_call>{"name", "arguments"}</tool_call>).
#pragma once

#include <memory>
#include <string_view>

#include "core/status.h"
#include "server/parsers/response_template.h"

namespace beam::server {

// The built-in Hermes template as JSON text (the same declarative form checkpoints ship).
std::string_view hermes_response_template_json();

Expected<std::shared_ptr<const ResponseTemplate>> load_hermes_response_template();

// From a parsed tokenizer_config.json object. An invalid "response_template" is an error naming
// `source` (e.g. the file path); a missing or null one selects the built-in template.
Expected<std::shared_ptr<const ResponseTemplate>> response_template_from_tokenizer_config(
    const Json& tokenizer_config, std::string_view source);

// Same, from the file's text (parsed keeping key order, as transformers does).
Expected<std::shared_ptr<const ResponseTemplate>> response_template_from_tokenizer_config_text(
    std::string_view tokenizer_config_json, std::string_view source);

}  // namespace beam::server
