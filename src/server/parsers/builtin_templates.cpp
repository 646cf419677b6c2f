// Built-in response_template and template selection (see builtin_templates.h).
#include "server/parsers/builtin_templates.h"

#include <string>

namespace beam::server {
namespace {

// Keep identical to HERMES in tools/reference/parser_fixtures/templates.py (golden fixture
// hermes_builtin.json; a unit test compares them). Closes swallow trailing whitespace so the
// gaps between think / tool-call blocks do not become empty content pieces; content pieces
// before and after tool calls are kept, joined by a blank line; a </think> that closes no open
// region (think block opened by an unanchored prompt, or closed after a tool call) is swallowed
// by `think_end` (always empty, so absent from the message) instead of leaking into content.
constexpr std::string_view kHermesTemplate = R"json({
  "version": 1,
  "start_anchor": "<|im_start|>assistant\n",
  "defaults": {"role": "assistant"},
  "fields": {
    "thinking": {"open": "<think>", "close_pattern": "</think>\\s*"},
    "tool_calls": {
      "open": "<tool_call>",
      "close_pattern": "</tool_call>\\s*",
      "repeats": true,
      "content": "json",
      "transform": {"type": "function", "function": "{content}"}
    },
    "content": {"close": "<|im_end|>", "repeats": true, "join": "\n\n"},
    "think_end": {"open_pattern": "</think>\\s*", "close_pattern": ""}
  }
})json";

}  // namespace

std::string_view hermes_response_template_json() {
  return kHermesTemplate;
}

Expected<std::shared_ptr<const ResponseTemplate>> load_hermes_response_template() {
  const Json spec = Json::parse(kHermesTemplate.begin(), kHermesTemplate.end(), nullptr, false);
  if (spec.is_discarded()) return make_error("built-in Hermes response_template is not valid JSON");
  auto loaded = load_response_template(spec);
  if (!loaded.ok())
    return make_error("built-in Hermes response_template: " + loaded.error().message);
  return loaded;
}

Expected<std::shared_ptr<const ResponseTemplate>> response_template_from_tokenizer_config(
    const Json& tokenizer_config, std::string_view source) {
  if (!tokenizer_config.is_object()) {
    return make_error(std::string(source) + ": expected a JSON object");
  }
  auto it = tokenizer_config.find("response_template");
  if (it == tokenizer_config.end() || it->is_null()) return load_hermes_response_template();
  auto loaded = load_response_template(*it);
  if (!loaded.ok()) {
    return make_error(std::string(source) + ": response_template: " + loaded.error().message);
  }
  return loaded;
}

Expected<std::shared_ptr<const ResponseTemplate>> response_template_from_tokenizer_config_text(
    std::string_view tokenizer_config_json, std::string_view source) {
  const Json config = Json::parse(tokenizer_config_json.begin(), tokenizer_config_json.end(),
                                  nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return make_error(std::string(source) + ": not valid JSON");
  return response_template_from_tokenizer_config(config, source);
}

}  // namespace beam::server
