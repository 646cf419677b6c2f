// Responses request parsing (see responses_request.h).
#include "server/openai/responses_request.h"

#include "server/openai/chat_request.h"
#include "server/parsers/bounded_json.h"

namespace beam::server {
namespace {

// Flat Responses tools ({"type": "function", "name", "parameters"}) → chat-format tools.
ApiExpected<Json> convert_tools(const Json& tools) {
  if (!tools.is_array()) return invalid_request("'tools': expected an array", "tools");
  Json out = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string p = indexed_path("tools", i);
    FieldReader r(tools[i], p);
    std::string type, name;
    std::optional<std::string> description;
    r.require("type", &type);
    if (!r.failed() && type != "function") r.fail("type", "only \"function\" tools are supported, got \"" + type + "\"");
    r.require("name", &name);
    r.read("description", &description);
    if (r.failed()) return r.take_error();
    Json fn = {{"name", name}};
    if (description) fn["description"] = *description;
    if (const Json* params = r.get("parameters")) fn["parameters"] = *params;
    out.push_back(Json{{"type", "function"}, {"function", std::move(fn)}});
  }
  API_ASSIGN_OR_RETURN(bool ok, validate_openai_tools(out, "tools"));
  (void)ok;
  return out;
}

// The assistant message that function_call items (and a preceding reasoning item) attach to.
Json& open_assistant(Json& messages) {
  if (messages.empty() || messages.back()["role"] != "assistant") {
    messages.push_back(Json{{"role", "assistant"}, {"content", ""}});
  }
  return messages.back();
}

ApiExpected<bool> convert_item(const Json& item, const std::string& p, Json& messages, std::string& reasoning) {
  if (!item.is_object()) return invalid_request("'" + p + "': expected an object", p);
  FieldReader r(item, p);
  std::string type = "message";
  r.read("type", &type);
  if (r.failed()) return r.take_error();
  if (type == "message") {
    std::string role;
    r.require("role", &role);
    if (r.failed()) return r.take_error();
    const Json* content = r.get("content");
    if (!content) return invalid_request("'" + p + ".content' is required", p + ".content");
    Json m = {{"role", role}, {"content", *content}};
    API_ASSIGN_OR_RETURN(Json converted, convert_openai_messages(Json::array({m}), p));
    Json msg = converted[0];
    if (msg["role"] == "assistant" && !reasoning.empty()) {
      msg["reasoning_content"] = reasoning;
      reasoning.clear();
    }
    messages.push_back(std::move(msg));
    return true;
  }
  if (type == "function_call") {
    std::string call_id, name, arguments = "{}";
    r.require("call_id", &call_id);
    r.require("name", &name);
    r.read("arguments", &arguments);
    if (r.failed()) return r.take_error();
    Json& a = open_assistant(messages);
    if (!reasoning.empty()) {
      a["reasoning_content"] = reasoning;
      reasoning.clear();
    }
    Expected<Json> parsed = parse_bounded_json(arguments);
    const Json args = parsed.ok() ? std::move(parsed).value() : Json();
    if (!a.contains("tool_calls")) a["tool_calls"] = Json::array();
    a["tool_calls"].push_back(Json{{"id", call_id}, {"type", "function"},
                                   {"function", {{"name", name}, {"arguments", args.is_object() ? args : Json(arguments)}}}});
    return true;
  }
  if (type == "function_call_output") {
    std::string call_id, output;
    r.require("call_id", &call_id);
    if (const Json* o = r.get("output"); o && !o->is_string()) {
      API_ASSIGN_OR_RETURN(output, content_text(*o, p + ".output"));
    } else {
      r.require("output", &output);
    }
    if (r.failed()) return r.take_error();
    messages.push_back(Json{{"role", "tool"}, {"tool_call_id", call_id}, {"content", output}});
    return true;
  }
  if (type == "reasoning") {
    for (const char* key : {"content", "summary"}) {
      const Json* parts = r.get(key);
      if (!parts || !parts->is_array()) continue;
      for (const Json& part : *parts) {
        if (part.is_object() && part.contains("text") && part["text"].is_string()) reasoning += part["text"].get<std::string>();
      }
      if (!reasoning.empty()) break;
    }
    return true;
  }
  return invalid_request("'" + p + ".type': input item type '" + type + "' is not supported", p + ".type");
}

ApiExpected<Json> convert_input(const Json& input, const Json* instructions) {
  Json messages = Json::array();
  if (instructions) {
    if (!instructions->is_string()) return invalid_request("'instructions': expected a string", "instructions");
    messages.push_back(Json{{"role", "system"}, {"content", *instructions}});
  }
  if (input.is_string()) {
    messages.push_back(Json{{"role", "user"}, {"content", input}});
    return messages;
  }
  if (!input.is_array()) return invalid_request("'input': expected a string or an array of items", "input");
  std::string reasoning;
  for (size_t i = 0; i < input.size(); ++i) {
    API_ASSIGN_OR_RETURN(bool ok, convert_item(input[i], indexed_path("input", i), messages, reasoning));
    (void)ok;
  }
  if (messages.empty()) return invalid_request("'input' must not be empty", "input");
  return messages;
}

void read_limits_and_options(FieldReader& r, ResponsesRequest* req) {
  std::optional<int64_t> max_output_tokens;
  r.read("max_output_tokens", &max_output_tokens);
  if (max_output_tokens && *max_output_tokens < 1) r.fail("max_output_tokens", "must be >= 1");
  req->sampling.params.max_tokens = max_output_tokens;
  r.read("top_logprobs", &req->sampling.params.top_logprobs);
  if (const Json* include = r.get("include")) {
    if (!include->is_array()) r.fail_type("include", "an array of strings", *include);
    else
      for (const Json& v : *include)
        if (v == "message.output_text.logprobs") req->sampling.params.logprobs = true;
  }
  if (req->sampling.params.top_logprobs > 0) req->sampling.params.logprobs = true;
  r.read("stream", &req->stream);
  if (r.has("previous_response_id")) r.fail("previous_response_id", "is not supported: beamserve stores no responses; send the whole conversation as input items");
  if (r.has("n")) r.fail("n", "is not part of the Responses API");
  if (const Json* reasoning = r.get("reasoning")) {
    if (!reasoning->is_object()) return r.fail_type("reasoning", "an object", *reasoning);
    req->reasoning = *reasoning;
    FieldReader e(*reasoning, "reasoning");
    std::optional<std::string> effort;
    e.read("effort", &effort);
    if (e.failed()) return r.fail("reasoning", e.error().message);
    if (effort) req->prompt.variables["reasoning_effort"] = *effort;
  }
}

}  // namespace

ApiExpected<ResponsesRequest> parse_responses_request(const Json& body,
                                                      const FormatCaches& caches) {
  if (!body.is_object()) return invalid_request("the request body must be a JSON object");
  ResponsesRequest req;
  FieldReader r(body, "");
  r.read("model", &req.model);
  read_sampling_fields(r, "stop", &req.sampling);
  read_limits_and_options(r, &req);
  read_template_variables(r, &req.prompt.variables);
  const Json* input = r.get("input");
  if (!input) r.fail("input", "is required");
  if (r.failed()) return r.take_error();
  if (const Json* ins = r.get("instructions")) req.instructions = *ins;
  API_ASSIGN_OR_RETURN(req.prompt.messages, convert_input(*input, r.get("instructions")));
  if (const Json* tools = r.get("tools")) {
    req.tools = *tools;
    API_ASSIGN_OR_RETURN(Json converted, convert_tools(*tools));
    if (!converted.empty()) req.prompt.tools = std::move(converted);
  }
  if (const Json* tc = r.get("tool_choice")) req.tool_choice_json = *tc;
  API_ASSIGN_OR_RETURN(req.tool_choice, parse_openai_tool_choice(r.get("tool_choice"), "tool_choice"));
  r.read("parallel_tool_calls", &req.tool_choice.parallel);
  if (r.failed()) return r.take_error();
  if (const Json* text = r.get("text")) {
    if (!text->is_object()) return invalid_request("'text': expected an object", "text");
    auto format = text->find("format");
    const Json* f = format == text->end() || format->is_null() ? nullptr : &*format;
    API_ASSIGN_OR_RETURN(req.sampling.format,
                         parse_response_format(f, "text.format", FormatShape::kResponses, caches));
    if (f) req.text_format = *f;
  }
  return req;
}

}  // namespace beam::server
