// A model's chat template: loaded from the model directory the way Hugging Face transformers
// does it, and rendered with the variables apply_chat_template passes (messages, tools,
// documents, add_generation_prompt, the special tokens, extra keyword variables).
// Rendering matches @huggingface/jinja byte for byte (tests/templates compares them).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "text/jinja/template.h"

namespace beam::text {

// What one prompt is rendered from. JSON objects keep their key order (ordered_json): the
// template's tojson prints tool schemas and arguments in the order the client sent them.
struct ChatTemplateInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  std::optional<nlohmann::ordered_json> tools;  // absent: `tools` is none in the template
  bool add_generation_prompt = false;
  // Extra variables, e.g. {"enable_thinking": false}; a name absent here stays undefined.
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
  // A named template to use ("tool_use", ...); empty picks like transformers does.
  std::string template_name;
};

// Immutable after load; render() may run concurrently.
class ChatTemplate {
 public:
  // Template from DIR/chat_template.jinja (plus DIR/additional_chat_templates/NAME.jinja), else
  // tokenizer_config.json's "chat_template" (a string, or a list of {name, template});
  // special tokens (bos_token, eos_token, ...) from tokenizer_config.json. Errors name the file.
  static Expected<ChatTemplate> load(const std::filesystem::path& model_dir);

  // From a parsed tokenizer_config.json; `template_override` replaces its chat_template.
  // `origin` names the source in error messages.
  static Expected<ChatTemplate> from_config(const nlohmann::ordered_json& tokenizer_config,
                                            std::optional<std::string> template_override,
                                            const std::string& origin);

  // A template from `source` alone (as "default") with this one's special tokens: a request's own
  // chat template (vLLM's chat_template field). `origin` names it in errors.
  Expected<ChatTemplate> with_source(std::string source, const std::string& origin) const;

  Expected<std::string> render(const ChatTemplateInputs& inputs, const jinja::RenderOptions& options = {}) const;

  // Names of the available templates ("default", "tool_use", ...).
  std::vector<std::string> template_names() const;

 private:
  using TemplatePtr = std::shared_ptr<const jinja::Template>;

  Expected<const jinja::Template*> select(const ChatTemplateInputs& inputs) const;

  std::map<std::string, TemplatePtr> templates_;
  jinja::Variables special_tokens_;
  std::string origin_;
};

}  // namespace beam::text
