// libFuzzer target for the chat-template engine (src/text/jinja): the input is a template,
// parsed and (when valid) rendered against a fixed conversation with small render limits.
// Any crash, sanitizer report, leak or hang is a bug; errors are expected and ignored.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "text/jinja/template.h"
#include "text/jinja/value.h"

namespace {

using beam::text::jinja::RenderOptions;
using beam::text::jinja::Template;
using beam::text::jinja::Variables;

// The variables a chat template sees, with tools, tool calls and reasoning in the conversation.
const Variables& conversation() {
  static const Variables vars = [] {
    auto json = nlohmann::ordered_json::parse(R"({
      "messages": [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Weather in Paris? 😀"},
        {"role": "assistant", "content": "", "reasoning_content": "call it",
         "tool_calls": [{"type": "function", "id": "c1",
                         "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": 1.5, "x": [1, null]}}}]},
        {"role": "tool", "content": "{\"temp\": 20}", "tool_call_id": "c1"},
        {"role": "assistant", "content": "<think>\nok\n</think>\n\nSunny, 20C."}
      ],
      "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
      "add_generation_prompt": true, "enable_thinking": false, "bos_token": "<s>", "eos_token": "</s>"
    })");
    Variables v;
    for (const auto& [key, value] : json.items()) v.emplace_back(key, beam::text::jinja::value_from_json(value));
    return v;
  }();
  return vars;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  auto parsed = Template::parse(std::string(reinterpret_cast<const char*>(data), size));
  if (!parsed.ok()) return 0;
  RenderOptions options;
  options.limits.max_output_bytes = 1 << 16;
  options.limits.max_list_items = 1 << 12;
  options.limits.max_steps = 100000;
  options.limits.max_depth = 120;
  options.now = 1721952000;  // fixed clock: 2024-07-26
  (void)parsed->render(conversation(), options);
  return 0;
}
