// Chat prompts shared by the chat-style endpoints: a conversation in chat-template form (HF
// message dicts), tool_choice applied to it, rendered with the model's chat template and
// tokenized.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/api/json_fields.h"
#include "server/api/served_model.h"
#include "server/generation/generation_spec.h"

namespace beam::server {

struct ChatPrompt {
  Json messages = Json::array();     // [{"role", "content", "tool_calls", "reasoning_content", ...}]
  std::optional<Json> tools;         // OpenAI format: [{"type": "function", "function": {...}}]
  Json variables = Json::object();   // extra template variables (enable_thinking, reasoning_effort)
  // vLLM's chat_template: the request's own template source, used instead of the model's when the
  // server trusts request templates (ServedModel::request_templates; else a 400).
  std::optional<std::string> template_source;
  std::string assistant_prefill;     // appended after the generation prompt
  // HF's add_generation_prompt (vLLM's field) and continue_final_message (vLLM's field, and an
  // Anthropic conversation that ends with an assistant message): the last message stays open,
  // rendered without a generation prompt and cut right after its text as transformers does, so
  // the output continues it.
  bool add_generation_prompt = true;
  bool continue_final_message = false;
};

struct RenderedPrompt {
  std::string text;
  std::vector<int32_t> ids;
};

struct ToolChoice {
  enum class Mode { kAuto, kNone, kRequired, kNamed };
  Mode mode = Mode::kAuto;
  std::string name;  // kNamed
  // kRequired: more than one call may be made (OpenAI's parallel_tool_calls, Anthropic's
  // !disable_parallel_tool_use). A named function is called once.
  bool parallel = true;
};

// Renders with add_generation_prompt (or the final message left open) and tokenizes (special
// tokens in the rendered text are control tokens). Template errors (e.g. "roles must alternate")
// are 400s, and so is a final message to continue whose text the template does not write as given.
ApiExpected<RenderedPrompt> render_chat_prompt(const ServedModel& model, const ChatPrompt& prompt);

// none: tools are not offered and tool-call text comes back as content; required: the assistant
// turn is opened with the template's tool-call delimiter; named: only that function is offered and
// the turn is opened the same way. This steers the model; prepare_chat_prompt also constrains the
// call where the model allows it (tool_call_format.h).
ApiExpected<bool> apply_tool_choice(const ToolChoice& choice, const ResponseTemplate* response_template,
                                    ChatPrompt* prompt, GenerationSpec* spec);

// The chat endpoints' steps once a request is parsed: the model name and chat template checks, the
// tools offered (spec->tools, output parsing on), tool_choice applied, then the rendered prompt.
ApiExpected<RenderedPrompt> prepare_chat_prompt(const ServedModel& model,
                                                const std::string& requested_model,
                                                const ToolChoice& tool_choice, ChatPrompt* prompt,
                                                GenerationSpec* spec);

// Validates an OpenAI tools array ([{"type": "function", "function": {"name", ...}}]).
ApiExpected<bool> validate_openai_tools(const Json& tools, const std::string& path);

}  // namespace beam::server
