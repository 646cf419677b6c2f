// Chat completions request parsing (see chat_request.h).
#include "server/openai/chat_request.h"

#include "server/api/prompt_truncation.h"
#include "server/parsers/bounded_json.h"

namespace beam::server {
namespace {

// Fields whose meaning beamserve cannot honour: rejected instead of silently ignored.
constexpr const char* kUnsupported[] = {"functions", "function_call", "audio", "prediction", "web_search_options"};

ApiExpected<Json> convert_tool_calls(const Json& calls, const std::string& path) {
  if (!calls.is_array()) return invalid_request("'" + path + "': expected an array", path);
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string p = indexed_path(path, i);
    FieldReader r(calls[i], p);
    if (!calls[i].is_object()) return invalid_request("'" + p + "': expected an object", p);
    std::string id, type = "function";
    r.read("id", &id);
    r.read("type", &type);
    const Json* fn = r.get("function");
    if (!fn || !fn->is_object()) r.fail("function", "expected an object with name and arguments");
    if (r.failed()) return r.take_error();
    FieldReader f(*fn, p + ".function");
    std::string name, arguments = "{}";
    f.require("name", &name);
    f.read("arguments", &arguments);
    if (f.failed()) return f.take_error();
    // Templates expect arguments as a mapping (transformers' convention); keep text that is not JSON.
    Expected<Json> parsed = parse_bounded_json(arguments);
    const Json args = parsed.ok() ? std::move(parsed).value() : Json();
    Json call = {{"id", id}, {"type", type},
                 {"function", {{"name", name}, {"arguments", args.is_object() ? args : Json(arguments)}}}};
    out.push_back(std::move(call));
  }
  return out;
}

ApiExpected<Json> convert_message(const Json& m, const std::string& p) {
  if (!m.is_object()) return invalid_request("'" + p + "': expected a message object", p);
  FieldReader r(m, p);
  std::string role;
  r.require("role", &role);
  if (r.failed()) return r.take_error();
  Json out = Json::object();
  if (role == "developer") role = "system";
  if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
    return invalid_request("'" + p + ".role': unknown role '" + role + "' (system, developer, user, assistant, tool)",
                           p + ".role");
  }
  out["role"] = role;
  const Json* content = r.get("content");
  if (content) {
    API_ASSIGN_OR_RETURN(std::string text, content_text(*content, p + ".content"));
    out["content"] = std::move(text);
  } else if (role != "assistant") {
    return invalid_request("'" + p + ".content' is required for role '" + role + "'", p + ".content");
  } else {
    out["content"] = "";
  }
  std::optional<std::string> name, tool_call_id, reasoning;
  r.read("name", &name);
  r.read("tool_call_id", &tool_call_id);
  r.read("reasoning_content", &reasoning);
  if (!reasoning) r.read("reasoning", &reasoning);
  if (r.failed()) return r.take_error();
  if (name) out["name"] = *name;
  if (role == "tool") {
    if (!tool_call_id) return invalid_request("'" + p + ".tool_call_id' is required for role 'tool'", p + ".tool_call_id");
    out["tool_call_id"] = *tool_call_id;
  }
  if (role == "assistant") {
    if (reasoning) out["reasoning_content"] = *reasoning;
    if (const Json* calls = r.get("tool_calls")) {
      API_ASSIGN_OR_RETURN(Json converted, convert_tool_calls(*calls, p + ".tool_calls"));
      out["tool_calls"] = std::move(converted);
    }
  }
  return out;
}

// The output limit may be 0 (the prompt scored alone) only with prompt_logprobs.
void read_max_tokens(FieldReader& r, bool prompt_logprobs, SamplingParams* p, const char** field) {
  std::optional<int64_t> max_tokens, max_completion_tokens;
  r.read("max_tokens", &max_tokens);
  r.read("max_completion_tokens", &max_completion_tokens);
  if (max_completion_tokens) {
    max_tokens = max_completion_tokens;
    *field = "max_completion_tokens";
  }
  if (max_tokens && *max_tokens < (prompt_logprobs ? 0 : 1)) {
    r.fail(*field, std::string("must be >= ") +
                       (prompt_logprobs ? "0" : "1 (0 needs 'prompt_logprobs')") + ", got " +
                       std::to_string(*max_tokens));
  }
  p->max_tokens = max_tokens;
}

// vLLM's prompt_logprobs; like vLLM, not with stream.
void read_prompt_logprobs(FieldReader& r, ChatRequest* req) {
  r.read("prompt_logprobs", &req->prompt_logprobs);
  if (!req->prompt_logprobs) return;
  if (*req->prompt_logprobs < 0 || *req->prompt_logprobs > kMaxTopLogprobs) {
    r.fail("prompt_logprobs", "must be in [0, 20] (alternatives per prompt token), got " +
                                  std::to_string(*req->prompt_logprobs));
  } else if (req->stream) {
    r.fail("prompt_logprobs",
           "is not available with stream: true (as in vLLM); send it without stream");
  }
}

}  // namespace

ApiExpected<std::string> content_text(const Json& content, const std::string& path) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    return invalid_request("'" + path + "': expected a string or an array of content parts, got " +
                               json_type_name(content), path);
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string p = indexed_path(path, i);
    const Json& part = content[i];
    if (!part.is_object()) return invalid_request("'" + p + "': expected a content part object", p);
    FieldReader r(part, p);
    std::string type, t;
    r.require("type", &type);
    if (r.failed()) return r.take_error();
    if (type != "text" && type != "input_text" && type != "output_text") {
      return invalid_request("'" + p + ".type': content part type '" + type +
                                 "' is not supported (this model reads text only)", p + ".type");
    }
    r.require("text", &t);
    if (r.failed()) return r.take_error();
    if (i > 0) text += "\n";
    text += t;
  }
  return text;
}

ApiExpected<Json> convert_openai_messages(const Json& messages, const std::string& path) {
  if (!messages.is_array()) return invalid_request("'" + path + "': expected an array of messages", path);
  if (messages.empty()) return invalid_request("'" + path + "': at least one message is required", path);
  Json out = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    API_ASSIGN_OR_RETURN(Json m, convert_message(messages[i], indexed_path(path, i)));
    out.push_back(std::move(m));
  }
  return out;
}

ApiExpected<ToolChoice> parse_openai_tool_choice(const Json* value, const std::string& path) {
  ToolChoice c;
  if (!value) return c;
  if (value->is_string()) {
    const std::string& s = value->get_ref<const std::string&>();
    if (s == "auto") return c;
    if (s == "none") c.mode = ToolChoice::Mode::kNone;
    else if (s == "required") c.mode = ToolChoice::Mode::kRequired;
    else return invalid_request("'" + path + "': expected \"none\", \"auto\", \"required\" or a named function, got \"" + s + "\"", path);
    return c;
  }
  if (value->is_object()) {
    FieldReader r(*value, path);
    std::string type, name;
    r.require("type", &type);
    if (const Json* fn = r.get("function")) {
      FieldReader f(*fn, path + ".function");
      f.require("name", &name);
      if (f.failed()) return f.take_error();
    } else {
      r.require("name", &name);
    }
    if (r.failed()) return r.take_error();
    if (type != "function") return invalid_request("'" + path + ".type': expected \"function\"", path + ".type");
    c.mode = ToolChoice::Mode::kNamed;
    c.name = name;
    return c;
  }
  return invalid_request("'" + path + "': expected a string or an object, got " + json_type_name(*value), path);
}

void read_template_variables(FieldReader& r, Json* variables) {
  if (const Json* kwargs = r.get("chat_template_kwargs")) {
    if (!kwargs->is_object()) return r.fail_type("chat_template_kwargs", "an object", *kwargs);
    for (const auto& [k, v] : kwargs->items()) (*variables)[k] = v;
  }
  std::optional<std::string> effort;
  r.read("reasoning_effort", &effort);
  if (effort) (*variables)["reasoning_effort"] = *effort;
}

void read_request_template(FieldReader& r, ChatPrompt* prompt) {
  r.read("chat_template", &prompt->template_source);
  if (const Json* documents = r.get("documents")) {
    bool ok = documents->is_array();
    for (size_t i = 0; ok && i < documents->size(); ++i) {
      const Json& d = (*documents)[i];
      ok = d.is_object();
      for (auto it = d.begin(); ok && it != d.end(); ++it) ok = it->is_string();
    }
    if (!ok)
      return r.fail("documents", "must be a list of objects of strings (e.g. {\"title\": ..., "
                                 "\"text\": ...}), as vLLM passes them to the chat template");
    prompt->variables["documents"] = *documents;
  }
}

void read_generation_prompt_fields(FieldReader& r, ChatPrompt* prompt) {
  r.read("add_generation_prompt", &prompt->add_generation_prompt);
  r.read("continue_final_message", &prompt->continue_final_message);
  if (prompt->continue_final_message && r.has("add_generation_prompt") &&
      prompt->add_generation_prompt)
    r.fail("continue_final_message",
           "cannot be combined with add_generation_prompt: true (the final message is continued, "
           "no new one is opened)");
}

ApiExpected<ChatRequest> parse_chat_request(const Json& body, const FormatCaches& caches) {
  if (!body.is_object()) return invalid_request("the request body must be a JSON object");
  ChatRequest req;
  FieldReader r(body, "");
  for (const char* key : kUnsupported) {
    if (r.has(key)) r.fail(key, "is not supported by beamserve");
  }
  r.read("model", &req.model);
  const Json* messages = r.get("messages");
  if (!messages) r.fail("messages", "is required");
  read_sampling_fields(r, "stop", &req.sampling);
  read_routed_experts_fields(r, &req.sampling);
  read_thinking_budget(r, &req.sampling);
  r.read("stream", &req.stream);
  read_prompt_logprobs(r, &req);
  read_max_tokens(r, req.prompt_logprobs.has_value(), &req.sampling.params, &req.max_tokens_field);
  r.read("logprobs", &req.sampling.params.logprobs);
  r.read("top_logprobs", &req.sampling.params.top_logprobs);
  r.read("return_tokens_as_token_ids", &req.tokens_as_ids);
  read_truncate_prompt_tokens(r, &req.truncate_prompt_tokens);
  read_beam_search_fields(r, &req.beam);
  API_ASSIGN_OR_RETURN(bool output, read_output_fields(r, &req.output));
  (void)output;
  read_template_variables(r, &req.prompt.variables);
  read_request_template(r, &req.prompt);
  read_generation_prompt_fields(r, &req.prompt);
  if (r.failed()) return r.take_error();
  API_ASSIGN_OR_RETURN(req.prompt.messages, convert_openai_messages(*messages, "messages"));
  if (const Json* tools = r.get("tools")) {
    API_ASSIGN_OR_RETURN(bool ok, validate_openai_tools(*tools, "tools"));
    (void)ok;
    if (!tools->empty()) req.prompt.tools = *tools;
  }
  API_ASSIGN_OR_RETURN(req.tool_choice, parse_openai_tool_choice(r.get("tool_choice"), "tool_choice"));
  r.read("parallel_tool_calls", &req.tool_choice.parallel);
  if (r.failed()) return r.take_error();
  // response_format, or vLLM's / SGLang's structured-output fields (parse_request_format).
  API_ASSIGN_OR_RETURN(req.sampling.format, parse_request_format(body, caches));
  return req;
}

}  // namespace beam::server
