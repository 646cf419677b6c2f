// Anthropic Messages request parsing (see messages_request.h).
#include "server/anthropic/messages_request.h"

namespace beam::server {
namespace {

ApiExpected<std::string> blocks_text(const Json& content, const std::string& path) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return invalid_request("'" + path + "': expected a string or an array of blocks", path);
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string p = indexed_path(path, i);
    FieldReader r(content[i], p);
    std::string type, t;
    r.require("type", &type);
    if (!r.failed() && type != "text") r.fail("type", "block type '" + type + "' is not supported here (text only)");
    r.require("text", &t);
    if (r.failed()) return r.take_error();
    text += t;
  }
  return text;
}

// One Anthropic message → one or more chat-template messages (tool results become tool messages).
ApiExpected<bool> convert_message(const Json& m, const std::string& p, Json& out) {
  if (!m.is_object()) return invalid_request("'" + p + "': expected a message object", p);
  FieldReader r(m, p);
  std::string role;
  r.require("role", &role);
  if (r.failed()) return r.take_error();
  if (role != "user" && role != "assistant")
    return invalid_request("'" + p + ".role': expected \"user\" or \"assistant\", got \"" + role + "\"", p + ".role");
  const Json* content = r.get("content");
  if (!content) return invalid_request("'" + p + ".content' is required", p + ".content");
  if (content->is_string()) {
    out.push_back(Json{{"role", role}, {"content", *content}});
    return true;
  }
  if (!content->is_array()) return invalid_request("'" + p + ".content': expected a string or an array of blocks", p + ".content");
  Json msg = {{"role", role}, {"content", ""}};
  std::string text, thinking;
  Json calls = Json::array();
  for (size_t i = 0; i < content->size(); ++i) {
    const std::string bp = indexed_path(p + ".content", i);
    const Json& b = (*content)[i];
    FieldReader br(b, bp);
    std::string type;
    br.require("type", &type);
    if (br.failed()) return br.take_error();
    if (type == "text") {
      std::string t;
      br.require("text", &t);
      if (br.failed()) return br.take_error();
      text += t;
    } else if (type == "thinking" && role == "assistant") {
      std::string t;
      br.read("thinking", &t);
      thinking += t;
    } else if (type == "redacted_thinking") {
      continue;
    } else if (type == "tool_use" && role == "assistant") {
      std::string id, name;
      br.require("id", &id);
      br.require("name", &name);
      const Json* input = br.get("input");
      if (input && !input->is_object()) br.fail_type("input", "an object", *input);
      if (br.failed()) return br.take_error();
      calls.push_back(Json{{"id", id}, {"type", "function"},
                           {"function", {{"name", name}, {"arguments", input ? *input : Json::object()}}}});
    } else if (type == "tool_result" && role == "user") {
      std::string id;
      br.require("tool_use_id", &id);
      if (br.failed()) return br.take_error();
      std::string result;
      if (const Json* c = br.get("content")) {
        API_ASSIGN_OR_RETURN(result, blocks_text(*c, bp + ".content"));
      }
      out.push_back(Json{{"role", "tool"}, {"tool_call_id", id}, {"content", result}});
    } else {
      return invalid_request("'" + bp + ".type': block type '" + type + "' is not supported in a " + role + " message",
                             bp + ".type");
    }
  }
  if (role == "user" && text.empty() && !out.empty() && out.back()["role"] == "tool") return true;
  msg["content"] = text;
  if (!thinking.empty()) msg["reasoning_content"] = thinking;
  if (!calls.empty()) msg["tool_calls"] = std::move(calls);
  out.push_back(std::move(msg));
  return true;
}

// Whether the conversation ends with an assistant message, which the response continues (a
// prefill; `last`: its chat-template form). As Anthropic's API: its text may not end with
// whitespace, and it may not hold tool_use blocks.
ApiExpected<bool> continues_final_message(const Json& message, const Json& last) {
  if (message.value("role", "") != "assistant") return false;
  const std::string path = "messages";
  if (last.contains("tool_calls"))
    return invalid_request(
        "'messages': a final assistant message with tool_use blocks cannot be continued (send the "
        "tool_result in a user message)",
        path);
  const std::string& text = last["content"].get_ref<const std::string&>();
  if (!text.empty() && std::string_view(" \t\n\r\f\v").find(text.back()) != std::string::npos)
    return invalid_request(
        "'messages': final assistant content cannot end with trailing whitespace", path);
  return true;
}

ApiExpected<Json> convert_tools(const Json& tools) {
  if (!tools.is_array()) return invalid_request("'tools': expected an array", "tools");
  Json out = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string p = indexed_path("tools", i);
    FieldReader r(tools[i], p);
    std::string name, type = "custom";
    std::optional<std::string> description;
    r.read("type", &type);
    if (!r.failed() && type != "custom") r.fail("type", "server tool '" + type + "' is not supported; define a custom tool");
    r.require("name", &name);
    r.read("description", &description);
    const Json* schema = r.get("input_schema");
    if (!schema) r.fail("input_schema", "is required");
    else if (!schema->is_object()) r.fail_type("input_schema", "a JSON schema object", *schema);
    if (r.failed()) return r.take_error();
    Json fn = {{"name", name}};
    if (description) fn["description"] = *description;
    fn["parameters"] = *schema;
    out.push_back(Json{{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

ApiExpected<ToolChoice> parse_tool_choice(const Json* v) {
  ToolChoice c;
  if (!v) return c;
  FieldReader r(*v, "tool_choice");
  if (!v->is_object()) return invalid_request("'tool_choice': expected an object", "tool_choice");
  std::string type;
  r.require("type", &type);
  bool disable_parallel = false;
  r.read("disable_parallel_tool_use", &disable_parallel);
  if (r.failed()) return r.take_error();
  c.parallel = !disable_parallel;
  if (type == "auto") return c;
  if (type == "none") c.mode = ToolChoice::Mode::kNone;
  else if (type == "any") c.mode = ToolChoice::Mode::kRequired;
  else if (type == "tool") {
    c.mode = ToolChoice::Mode::kNamed;
    r.require("name", &c.name);
    if (r.failed()) return r.take_error();
  } else {
    return invalid_request("'tool_choice.type': expected auto, any, tool or none, got \"" + type + "\"", "tool_choice.type");
  }
  return c;
}

// thinking: {"type": "enabled" | "adaptive" | "disabled", "budget_tokens"?}: the template's
// enable_thinking, and budget_tokens as the reasoning budget.
void read_thinking(FieldReader& r, Json* variables, SamplingFields* sampling) {
  const Json* t = r.get("thinking");
  if (!t) return;
  FieldReader tr(*t, "thinking");
  std::string type;
  tr.require("type", &type);
  std::optional<int64_t> budget;
  tr.read("budget_tokens", &budget);
  if (tr.failed()) return r.fail("thinking", tr.error().message);
  if (type == "enabled" || type == "adaptive") (*variables)["enable_thinking"] = true;
  else if (type == "disabled") (*variables)["enable_thinking"] = false;
  else r.fail("thinking", "type must be \"enabled\" or \"disabled\", got \"" + type + "\"");
  if (!budget || type == "disabled") return;
  if (*budget < 1) return r.fail("thinking.budget_tokens", "must be >= 1");
  sampling->thinking_budget = budget;
  sampling->thinking_budget_field = "thinking.budget_tokens";
}

}  // namespace

ApiExpected<MessagesRequest> parse_messages_request(const Json& body, bool count_only,
                                                    const FormatCaches& caches) {
  if (!body.is_object()) return invalid_request("the request body must be a JSON object");
  MessagesRequest req;
  FieldReader r(body, "");
  r.read("model", &req.model);
  read_sampling_fields(r, "stop_sequences", &req.sampling);
  std::optional<int64_t> max_tokens;
  r.read("max_tokens", &max_tokens);
  if (!count_only && !max_tokens && !r.failed()) r.fail("max_tokens", "is required");
  if (max_tokens && *max_tokens < 1) r.fail("max_tokens", "must be >= 1, got " + std::to_string(*max_tokens));
  req.sampling.params.max_tokens = max_tokens;
  r.read("stream", &req.stream);
  read_thinking(r, &req.prompt.variables, &req.sampling);
  if (const Json* kwargs = r.get("chat_template_kwargs")) {
    if (!kwargs->is_object()) r.fail_type("chat_template_kwargs", "an object", *kwargs);
    else
      for (const auto& [k, v] : kwargs->items()) req.prompt.variables[k] = v;
  }
  const Json* messages = r.get("messages");
  if (!messages) r.fail("messages", "is required");
  if (r.failed()) return r.take_error();
  if (const Json* system = r.get("system")) {
    API_ASSIGN_OR_RETURN(std::string text, blocks_text(*system, "system"));
    req.prompt.messages.push_back(Json{{"role", "system"}, {"content", text}});
  }
  if (!messages->is_array() || messages->empty())
    return invalid_request("'messages': expected a non-empty array of messages", "messages");
  for (size_t i = 0; i < messages->size(); ++i) {
    API_ASSIGN_OR_RETURN(bool ok, convert_message((*messages)[i], indexed_path("messages", i), req.prompt.messages));
    (void)ok;
  }
  API_ASSIGN_OR_RETURN(req.prompt.continue_final_message,
                       continues_final_message(messages->back(), req.prompt.messages.back()));
  if (const Json* tools = r.get("tools")) {
    API_ASSIGN_OR_RETURN(Json converted, convert_tools(*tools));
    if (!converted.empty()) req.prompt.tools = std::move(converted);
  }
  API_ASSIGN_OR_RETURN(req.tool_choice, parse_tool_choice(r.get("tool_choice")));
  // Anthropic's structured outputs.
  API_ASSIGN_OR_RETURN(req.sampling.format,
                       parse_response_format(r.get("output_format"), "output_format",
                                             FormatShape::kAnthropic, caches));
  return req;
}

}  // namespace beam::server
