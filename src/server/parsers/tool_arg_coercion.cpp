// Tool-argument casting by JSON-schema types (transformers' response_parser._coerce rules).
#include "server/parsers/tool_arg_coercion.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace beam::server {
namespace {

std::optional<Json> coerce_number(const std::string& raw) {
  const std::optional<double> number = py_float(raw);
  if (!number || std::isnan(*number) || std::isinf(*number)) return std::nullopt;
  // Ints are kept when the text had no fractional part ("1e3" → 1000, "1.0" → 1.0).
  const bool integral = std::trunc(*number) == *number && raw.find('.') == std::string::npos;
  if (integral && std::fabs(*number) < 9.2e18) return Json(static_cast<int64_t>(*number));
  return Json(*number);
}

std::optional<Json> coerce_one(const std::string& raw, const std::string& type) {
  if (type == "integer") return py_int(raw);
  if (type == "number") return coerce_number(raw);
  if (type == "boolean") {
    const std::string word = ascii_lower(py_strip(raw));
    if (word == "true" || word == "1") return Json(true);
    if (word == "false" || word == "0") return Json(false);
    return std::nullopt;
  }
  if (type == "null") {
    const std::string_view word = py_strip(raw);
    if (word == "null" || word == "None") return Json(nullptr);
    return std::nullopt;
  }
  if (type == "object" || type == "array") {
    std::optional<Json> decoded = py_json_loads(raw);
    if (decoded && (type == "object" ? decoded->is_object() : decoded->is_array())) return decoded;
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::string> schema_types(const Json& schema) {
  std::vector<std::string> types;
  if (!schema.is_object()) return types;
  if (auto declared = schema.find("type"); declared != schema.end()) {
    if (declared->is_string()) types.push_back(declared->get<std::string>());
    if (declared->is_array()) {
      for (const Json& t : *declared) {
        if (t.is_string()) types.push_back(t.get<std::string>());
      }
    }
  }
  if (auto any_of = schema.find("anyOf"); any_of != schema.end() && any_of->is_array()) {
    for (const Json& choice : *any_of) {
      for (auto& t : schema_types(choice)) types.push_back(std::move(t));
    }
  }
  if (auto nullable = schema.find("nullable");
      nullable != schema.end() && py_truthy(*nullable) &&
      std::find(types.begin(), types.end(), "null") == types.end()) {
    types.push_back("null");
  }
  return types;
}

Json coerce_argument(const std::string& raw, const std::vector<std::string>& types) {
  for (const std::string& type : types) {
    if (std::optional<Json> value = coerce_one(raw, type)) return *std::move(value);
  }
  return Json(raw);  // "string", unknown types and failed casts keep the text
}

ToolSchemas ToolSchemas::from_tools(const Json& tools) {
  ToolSchemas schemas;
  if (!tools.is_array()) return schemas;
  for (const Json& tool : tools) {
    if (!tool.is_object()) continue;
    const Json& fn = tool.contains("function") ? tool["function"] : tool;
    if (!fn.is_object() || !fn.contains("name") || !fn["name"].is_string()) continue;
    auto& params = schemas.tools_[fn["name"].get<std::string>()];
    params.clear();
    auto parameters = fn.find("parameters");
    if (parameters == fn.end() || !parameters->is_object()) continue;
    auto properties = parameters->find("properties");
    if (properties == parameters->end() || !properties->is_object()) continue;
    for (auto it = properties->begin(); it != properties->end(); ++it) {
      params[it.key()] = schema_types(it.value());
    }
  }
  return schemas;
}

void ToolSchemas::coerce_tool_calls(Json& value) const {
  if (value.is_array()) {
    for (Json& item : value) coerce_tool_calls(item);
    return;
  }
  if (!value.is_object()) return;
  auto fn = value.find("function");
  if (fn == value.end() || !fn->is_object()) return;
  auto name = fn->find("name");
  auto arguments = fn->find("arguments");
  if (name == fn->end() || !name->is_string() || arguments == fn->end() ||
      !arguments->is_object()) {
    return;
  }
  auto tool = tools_.find(name->get_ref<const std::string&>());
  if (tool == tools_.end()) return;
  for (auto it = arguments->begin(); it != arguments->end(); ++it) {
    auto param = tool->second.find(it.key());
    if (param == tool->second.end() || param->second.empty()) continue;
    Json& argument = it.value();
    if (argument.is_string()) {
      argument = coerce_argument(argument.get<std::string>(), param->second);
    } else if (argument.is_array()) {  // duplicate keys collected by merge_duplicates
      for (Json& item : argument) {
        if (item.is_string()) item = coerce_argument(item.get<std::string>(), param->second);
      }
    }
  }
}

}  // namespace beam::server
