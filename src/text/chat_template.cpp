// Chat template loading (model directory, tokenizer_config.json) and rendering (see chat_template.h).
#include "text/chat_template.h"

#include <fstream>
#include <sstream>

#include "text/jinja/error.h"
#include "text/jinja/value.h"

namespace beam::text {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

Expected<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A special token's text: a string, or an AddedToken object {"content": ...}; nullopt otherwise.
std::optional<std::string> token_text(const ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

// The special tokens transformers passes to every template (its special_tokens_map).
jinja::Variables special_token_variables(const ordered_json& config) {
  jinja::Variables vars;
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    if (!config.contains(key)) continue;
    if (auto text = token_text(config[key])) vars.emplace_back(key, jinja::Value::string(*text));
  }
  if (config.contains("additional_special_tokens") && config["additional_special_tokens"].is_array()) {
    jinja::Value::List tokens;
    for (const auto& t : config["additional_special_tokens"]) {
      if (auto text = token_text(t)) tokens.push_back(jinja::Value::string(*text));
    }
    vars.emplace_back("additional_special_tokens", jinja::Value::list(std::move(tokens)));
  }
  return vars;
}

// name → template source from tokenizer_config.json's "chat_template".
Expected<std::map<std::string, std::string>> config_templates(const ordered_json& config, const std::string& origin) {
  std::map<std::string, std::string> sources;
  if (!config.contains("chat_template") || config["chat_template"].is_null()) {
    return make_error(origin + ": no chat_template (and no chat_template.jinja)");
  }
  const ordered_json& t = config["chat_template"];
  if (t.is_string()) {
    sources["default"] = t.get<std::string>();
    return sources;
  }
  if (!t.is_array()) return make_error(origin + ": chat_template must be a string or a list of {name, template}");
  for (const auto& entry : t) {
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() || !entry.contains("template") ||
        !entry["template"].is_string()) {
      return make_error(origin + ": each chat_template entry needs string fields \"name\" and \"template\"");
    }
    sources[entry["name"].get<std::string>()] = entry["template"].get<std::string>();
  }
  if (sources.empty()) return make_error(origin + ": chat_template is an empty list");
  return sources;
}

}  // namespace

Expected<ChatTemplate> ChatTemplate::load(const fs::path& model_dir) {
  fs::path config_path = model_dir / "tokenizer_config.json";
  ordered_json config = ordered_json::object();
  std::error_code ec;
  if (fs::exists(config_path, ec)) {
    BEAM_ASSIGN_OR_RETURN(std::string text, read_file(config_path));
    config = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded()) return make_error(config_path.string() + ": invalid JSON");
    if (!config.is_object()) return make_error(config_path.string() + ": expected a JSON object");
  }
  fs::path jinja_path = model_dir / "chat_template.jinja";
  if (!fs::exists(jinja_path, ec)) return from_config(config, std::nullopt, config_path.string());
  BEAM_ASSIGN_OR_RETURN(std::string main_template, read_file(jinja_path));
  fs::path extra_dir = model_dir / "additional_chat_templates";
  if (!fs::is_directory(extra_dir, ec)) return from_config(config, main_template, jinja_path.string());
  // transformers: the main file becomes "default", each additional NAME.jinja a named template.
  ordered_json list = ordered_json::array();
  list.push_back({{"name", "default"}, {"template", main_template}});
  for (const auto& entry : fs::directory_iterator(extra_dir, ec)) {
    if (entry.path().extension() != ".jinja") continue;
    BEAM_ASSIGN_OR_RETURN(std::string text, read_file(entry.path()));
    list.push_back({{"name", entry.path().stem().string()}, {"template", text}});
  }
  config["chat_template"] = std::move(list);
  return from_config(config, std::nullopt, model_dir.string());
}

Expected<ChatTemplate> ChatTemplate::from_config(const ordered_json& tokenizer_config,
                                                 std::optional<std::string> template_override,
                                                 const std::string& origin) {
  ChatTemplate result;
  result.origin_ = origin;
  std::map<std::string, std::string> sources;
  if (template_override) {
    sources["default"] = std::move(*template_override);
  } else {
    BEAM_ASSIGN_OR_RETURN(sources, config_templates(tokenizer_config, origin));
  }
  for (auto& [name, source] : sources) {
    auto parsed = jinja::Template::parse(std::move(source));
    if (!parsed.ok()) return make_error("chat template '" + name + "' in " + origin + ": " + parsed.error().message);
    result.templates_[name] = std::make_shared<const jinja::Template>(std::move(parsed).value());
  }
  result.special_tokens_ = special_token_variables(tokenizer_config);
  return result;
}

Expected<ChatTemplate> ChatTemplate::with_source(std::string source,
                                                 const std::string& origin) const {
  auto parsed = jinja::Template::parse(std::move(source));
  if (!parsed.ok()) return make_error(origin + ": " + parsed.error().message);
  ChatTemplate result;
  result.origin_ = origin;
  result.templates_["default"] = std::make_shared<const jinja::Template>(std::move(parsed).value());
  result.special_tokens_ = special_tokens_;
  return result;
}

std::vector<std::string> ChatTemplate::template_names() const {
  std::vector<std::string> names;
  for (const auto& entry : templates_) names.push_back(entry.first);
  return names;
}

// transformers' choice: an explicit name; else "tool_use" when tools are given and it exists;
// else "default".
Expected<const jinja::Template*> ChatTemplate::select(const ChatTemplateInputs& inputs) const {
  std::string name = inputs.template_name;
  if (name.empty()) {
    bool has_tools = inputs.tools.has_value() && !inputs.tools->is_null();
    name = has_tools && templates_.count("tool_use") ? "tool_use" : "default";
  }
  auto it = templates_.find(name);
  if (it == templates_.end()) {
    std::string known;
    for (const auto& entry : templates_) known += (known.empty() ? "" : ", ") + entry.first;
    return make_error(origin_ + ": no chat template named '" + name + "' (available: " + known + ")");
  }
  return it->second.get();
}

Expected<std::string> ChatTemplate::render(const ChatTemplateInputs& inputs, const jinja::RenderOptions& options) const {
  BEAM_ASSIGN_OR_RETURN(const jinja::Template* tmpl, select(inputs));
  if (!inputs.messages.is_array()) return make_error("chat template input: messages must be a JSON array");
  if (!inputs.variables.is_object()) return make_error("chat template input: variables must be a JSON object");
  jinja::Variables vars;
  try {
    vars.emplace_back("messages", jinja::value_from_json(inputs.messages));
    bool has_tools = inputs.tools.has_value() && !inputs.tools->is_null();
    vars.emplace_back("tools", has_tools ? jinja::value_from_json(*inputs.tools) : jinja::Value::none());
    vars.emplace_back("documents", jinja::Value::none());
    vars.emplace_back("add_generation_prompt", jinja::Value::boolean(inputs.add_generation_prompt));
    for (const auto& token : special_tokens_) vars.push_back(token);
    for (const auto& [key, value] : inputs.variables.items()) vars.emplace_back(key, jinja::value_from_json(value));
  } catch (const jinja::TemplateError& error) {
    return make_error("chat template input: " + error.message);
  }
  auto rendered = tmpl->render(vars, options);
  if (!rendered.ok()) return make_error("chat template (" + origin_ + "): " + rendered.error().message);
  return rendered;
}

}  // namespace beam::text
