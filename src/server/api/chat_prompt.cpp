// Chat prompt rendering and tool_choice (see chat_prompt.h).
#include "server/api/chat_prompt.h"

#include "server/api/tool_call_format.h"

namespace beam::server {
namespace {

const Json* find_function(const Json& tools, const std::string& name) {
  for (const Json& t : tools) {
    const Json& fn = t.at("function");
    if (fn.at("name").get<std::string>() == name) return &t;
  }
  return nullptr;
}

// s without leading and trailing ASCII whitespace (Python's str.strip on ASCII text).
std::string_view stripped(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) - begin + 1);
}

// The conversation rendered with the chat template.
ApiExpected<std::string> render(const ServedModel& model, const Json& messages,
                                const ChatPrompt& prompt, bool add_generation_prompt) {
  text::ChatTemplateInputs inputs;
  inputs.messages = messages;
  inputs.tools = prompt.tools;
  inputs.add_generation_prompt = add_generation_prompt;
  inputs.variables = prompt.variables;
  std::shared_ptr<const text::ChatTemplate> own;  // the request's template
  if (prompt.template_source) {
    if (!model.request_templates)
      return invalid_request(
          "'chat_template': this server does not take chat templates from requests (start it "
          "with --trust-request-chat-template)",
          "chat_template");
    API_ASSIGN_OR_RETURN(own, model.request_templates->get(*prompt.template_source));
  }
  Expected<std::string> rendered = own ? own->render(inputs) : model.chat_template->render(inputs);
  if (!rendered.ok())
    return invalid_request(
        "the chat template rejected the conversation: " + rendered.error().message,
        own ? "chat_template" : "messages");
  return std::move(rendered).value();
}

// The conversation with its last message left open (transformers' continue_final_message): the
// rendering without a generation prompt, cut after the last occurrence of that message's text
// (else of its text without surrounding whitespace, which some templates trim). An empty last
// message is a new one: the earlier messages with the generation prompt.
ApiExpected<std::string> render_open_final_message(const ServedModel& model,
                                                   const ChatPrompt& prompt) {
  const Json& messages = prompt.messages;
  const Json* content = messages.empty() ? nullptr : &messages.back()["content"];
  if (!content || !content->is_string())
    return invalid_request("continuing the final message needs a final message with text content",
                           "messages");
  const std::string& text = content->get_ref<const std::string&>();
  if (text.empty()) {
    Json earlier = messages;
    earlier.erase(earlier.end() - 1);
    return render(model, earlier, prompt, /*add_generation_prompt=*/true);
  }
  API_ASSIGN_OR_RETURN(std::string rendered,
                       render(model, messages, prompt, /*add_generation_prompt=*/false));
  for (const std::string_view written : {std::string_view(text), stripped(text)}) {
    const size_t at = written.empty() ? std::string::npos : rendered.rfind(written);
    if (at != std::string::npos) return rendered.substr(0, at + written.size());
  }
  return invalid_request(
      "the chat template does not write the final message's text as given, so the output cannot "
      "continue it",
      "messages");
}

}  // namespace

ApiExpected<RenderedPrompt> render_chat_prompt(const ServedModel& model, const ChatPrompt& prompt) {
  if (!prompt.template_source) {
    API_ASSIGN_OR_RETURN(bool ok, require_chat_template(model));
    (void)ok;
  }
  API_ASSIGN_OR_RETURN(std::string rendered,
                       prompt.continue_final_message
                           ? render_open_final_message(model, prompt)
                           : render(model, prompt.messages, prompt, prompt.add_generation_prompt));
  RenderedPrompt out;
  out.text = std::move(rendered) + prompt.assistant_prefill;
  Expected<std::vector<text::TokenId>> ids = model.tokenizer->encode(out.text, /*allow_special=*/true);
  if (!ids.ok()) return invalid_request("the prompt could not be tokenized: " + ids.error().message, "messages");
  out.ids = std::move(ids).value();
  if (out.ids.empty() && prompt.template_source)
    return invalid_request("'chat_template' rendered the conversation as an empty prompt",
                           "chat_template");
  return out;
}

ApiExpected<bool> apply_tool_choice(const ToolChoice& choice, const ResponseTemplate* response_template,
                                    ChatPrompt* prompt, GenerationSpec* spec) {
  using Mode = ToolChoice::Mode;
  switch (choice.mode) {
    case Mode::kAuto:
      return true;
    case Mode::kNone:
      prompt->tools.reset();
      spec->parse_tool_calls = false;
      return true;
    case Mode::kRequired:
    case Mode::kNamed:
      break;
  }
  if (!prompt->tools || prompt->tools->empty()) {
    return invalid_request("tool_choice requires a tool call but 'tools' is empty", "tool_choice");
  }
  if (choice.mode == Mode::kNamed) {
    const Json* tool = find_function(*prompt->tools, choice.name);
    if (!tool) {
      return invalid_request("tool_choice names the function '" + choice.name + "', which is not in 'tools'",
                             "tool_choice");
    }
    prompt->tools = Json::array({*tool});
  }
  std::optional<size_t> field = response_template ? response_template->field_index("tool_calls") : std::nullopt;
  const TemplateField* f = field ? &response_template->fields[*field] : nullptr;
  if (!f || !f->open || !f->open->is_literal || f->open->literals.empty()) {
    return invalid_request("tool_choice 'required' or a named function needs a response_template whose tool-call "
                           "field opens with a literal delimiter; this model's does not",
                           "tool_choice");
  }
  prompt->assistant_prefill = f->open->literals.front();
  return true;
}

namespace {

// After apply_tool_choice: a required call is also constrained where the model allows it.
void constrain_required_call(const ServedModel& model, const ToolChoice& choice,
                             const ChatPrompt& prompt, GenerationSpec* spec) {
  if (choice.mode != ToolChoice::Mode::kRequired && choice.mode != ToolChoice::Mode::kNamed) return;
  const bool parallel = choice.mode == ToolChoice::Mode::kRequired && choice.parallel;
  if (std::optional<ResponseFormat> f = tool_call_format(model, *prompt.tools, parallel))
    spec->tool_format = std::move(*f);
}

}  // namespace

ApiExpected<RenderedPrompt> prepare_chat_prompt(const ServedModel& model,
                                                const std::string& requested_model,
                                                const ToolChoice& tool_choice, ChatPrompt* prompt,
                                                GenerationSpec* spec) {
  API_ASSIGN_OR_RETURN(spec->lora_name, model_adapter(model, requested_model));
  API_ASSIGN_OR_RETURN(bool ok, prompt->template_source ? require_tokenizer(model)
                                                        : require_chat_template(model));
  spec->parse_output = true;
  spec->tools = prompt->tools ? *prompt->tools : Json(nullptr);
  API_ASSIGN_OR_RETURN(ok,
                       apply_tool_choice(tool_choice, model.response_template.get(), prompt, spec));
  (void)ok;
  constrain_required_call(model, tool_choice, *prompt, spec);
  return render_chat_prompt(model, *prompt);
}

ApiExpected<bool> validate_openai_tools(const Json& tools, const std::string& path) {
  if (!tools.is_array()) return invalid_request("'" + path + "': expected an array of tools", path);
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string p = indexed_path(path, i);
    const Json& t = tools[i];
    if (!t.is_object()) return invalid_request("'" + p + "': expected an object", p);
    auto type = t.find("type");
    if (type == t.end() || !type->is_string() || *type != "function")
      return invalid_request("'" + p + ".type': only \"function\" tools are supported", p + ".type");
    auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object()) return invalid_request("'" + p + ".function': expected an object", p + ".function");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get_ref<const std::string&>().empty())
      return invalid_request("'" + p + ".function.name': expected a non-empty string", p + ".function.name");
    auto params = fn->find("parameters");
    if (params != fn->end() && !params->is_null() && !params->is_object())
      return invalid_request("'" + p + ".function.parameters': expected a JSON schema object", p + ".function.parameters");
  }
  return true;
}

}  // namespace beam::server
