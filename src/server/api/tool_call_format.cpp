// Tool-call constraints (see tool_call_format.h).
#include "server/api/tool_call_format.h"

#include "runtime/structured/json_grammar.h"
#include "server/api/served_model.h"

namespace beam::server {
namespace {

// Points every local "$ref" ("#...") of a tool's parameters at `base` + the same pointer.
void rebase_refs(Json& schema, const std::string& base) {
  if (schema.is_array()) {
    for (Json& item : schema) rebase_refs(item, base);
    return;
  }
  if (!schema.is_object()) return;
  for (auto& [key, value] : schema.items()) {
    if (key == "$ref" && value.is_string() && value.get<std::string>().rfind('#', 0) == 0)
      value = "#" + base + value.get<std::string>().substr(1);
    else
      rebase_refs(value, base);
  }
}

Json one_call(const Json& tool, const std::string& base) {
  const Json& fn = tool.at("function");
  Json params = fn.contains("parameters") && !fn["parameters"].is_null() ? fn["parameters"]
                                                                         : Json{{"type", "object"}};
  rebase_refs(params, base + "/properties/arguments");
  Json call = {{"type", "object"},
               {"properties", {{"name", {{"const", fn.at("name")}}}, {"arguments", params}}},
               {"required", {"name", "arguments"}}};
  return call;
}

}  // namespace

Json tool_call_schema(const Json& tools) {
  if (tools.size() == 1) return one_call(tools[0], "");
  Json any_of = Json::array();
  for (size_t i = 0; i < tools.size(); ++i)
    any_of.push_back(one_call(tools[i], "/anyOf/" + std::to_string(i)));
  return Json{{"anyOf", std::move(any_of)}};
}

std::optional<ResponseFormat> tool_call_format(const ServedModel& model, const Json& tools,
                                               bool parallel) {
  if (!model.tokenizer || !model.structured_vocab || !model.response_template) return std::nullopt;
  const std::optional<size_t> field = model.response_template->field_index("tool_calls");
  if (!field) return std::nullopt;
  const TemplateField& f = model.response_template->fields[*field];
  if (!f.open || !f.open->is_literal || f.open->literals.empty()) return std::nullopt;
  const std::string& open = f.open->literals.front();
  const std::optional<int32_t> open_id = added_token_id(*model.tokenizer, open);
  if (open.size() < 3 || open.front() != '<' || !open_id) return std::nullopt;
  const std::optional<int32_t> close = added_token_id(*model.tokenizer, "</" + open.substr(1));
  if (!close) return std::nullopt;
  // Agents send the same tools every turn: their schema compiles once and shares its masks
  // (ServedModel::schemas, keyed by the schema's text).
  const Json schema = tool_call_schema(tools);
  std::string schema_text = schema.dump();
  auto grammar = schema_grammar(schema, schema_text, format_caches(model));
  if (!grammar.ok()) return std::nullopt;
  ResponseFormat format;
  format.kind = ResponseFormat::Kind::kJsonSchema;
  format.grammar = std::move(grammar).value();
  format.schema_text = std::move(schema_text);
  format.path = "tools";
  format.call_close = close;
  if (parallel) format.call_open = open_id;
  format.reasoning_prelude = false;  // the turn is already inside the tool call
  return format;
}

}  // namespace beam::server
