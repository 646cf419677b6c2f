// ToolSchemas: the JSON-schema parameter types of each tool a request declares, used to cast
// tool-call arguments parsed as strings (xml-inline, kv-lines) the way transformers does.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "server/parsers/python_text.h"

namespace beam::server {

class ToolSchemas {
 public:
  ToolSchemas() = default;
  // From an OpenAI-style tools array ({"type": "function", "function": {name, parameters}}, or
  // the function object itself). Entries without a string name are skipped; never fails.
  static ToolSchemas from_tools(const Json& tools);

  // No tool with a usable name: coercion is off (as in transformers).
  bool empty() const { return tools_.empty(); }

  // Casts, in place, the string arguments of every tool call found in `value` (a call object
  // {"function": {"name", "arguments"}} or a list of them; anything else is left alone).
  void coerce_tool_calls(Json& value) const;

 private:
  // tool name → parameter name → candidate JSON-schema types, in schema order
  std::map<std::string, std::map<std::string, std::vector<std::string>>, std::less<>> tools_;
};

// Candidate types of one parameter schema: "type" (string or list), anyOf branches, nullable.
std::vector<std::string> schema_types(const Json& schema);

// transformers' _coerce: the first type that parses `raw` wins; otherwise `raw` itself.
Json coerce_argument(const std::string& raw, const std::vector<std::string>& types);

}  // namespace beam::server
