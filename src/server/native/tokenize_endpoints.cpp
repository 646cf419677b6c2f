// POST /tokenize and POST /detokenize (see native_endpoints.h).
#include "server/native/native_endpoints.h"
#include "server/openai/chat_request.h"

namespace beam::server {
namespace {

ApiExpected<Json> tokenize(const ServedModel& model, const Json& body) {
  if (!body.is_object()) return invalid_request("the request body must be a JSON object");
  FieldReader r(body, "");
  std::string requested;
  r.read("model", &requested);
  bool add_special_tokens = true;
  r.read("add_special_tokens", &add_special_tokens);
  bool token_strs = false;  // vLLM's return_token_strs
  r.read("return_token_strs", &token_strs);
  std::optional<std::string> prompt;
  r.read("prompt", &prompt);
  const Json* messages = r.get("messages");
  if (!prompt && !messages) r.fail("prompt", "either 'prompt' (text) or 'messages' (a conversation) is required");
  if (prompt && messages) r.fail("messages", "give either 'prompt' or 'messages', not both");
  ChatPrompt chat;
  read_template_variables(r, &chat.variables);
  read_request_template(r, &chat);
  read_generation_prompt_fields(r, &chat);
  if (r.failed()) return r.take_error();
  // Any served model (the base or an adapter) tokenizes alike.
  API_ASSIGN_OR_RETURN(const std::string lora_name, model_adapter(model, requested));
  (void)lora_name;
  API_ASSIGN_OR_RETURN(bool ok, require_tokenizer(model));
  (void)ok;
  std::vector<int32_t> ids;
  if (prompt) {
    Expected<std::vector<text::TokenId>> e = model.tokenizer->encode(*prompt, true, add_special_tokens);
    if (!e.ok()) return invalid_request("the prompt could not be tokenized: " + e.error().message, "prompt");
    ids = std::move(e).value();
  } else {
    API_ASSIGN_OR_RETURN(chat.messages, convert_openai_messages(*messages, "messages"));
    if (const Json* tools = r.get("tools")) {
      API_ASSIGN_OR_RETURN(ok, validate_openai_tools(*tools, "tools"));
      if (!tools->empty()) chat.tools = *tools;
    }
    API_ASSIGN_OR_RETURN(RenderedPrompt rendered, render_chat_prompt(model, chat));
    ids = std::move(rendered.ids);
  }
  Json out = {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", model.max_context_tokens}};
  if (token_strs) out["token_strs"] = model.tokenizer->id_to_tokens(ids);
  return out;
}

ApiExpected<Json> detokenize(const ServedModel& model, const Json& body) {
  if (!body.is_object()) return invalid_request("the request body must be a JSON object");
  FieldReader r(body, "");
  std::string requested;
  r.read("model", &requested);
  bool skip_special = false;
  r.read("skip_special_tokens", &skip_special);
  const Json* tokens = r.get("tokens");
  if (!tokens) r.fail("tokens", "is required");
  else if (!tokens->is_array()) r.fail_type("tokens", "an array of token ids", *tokens);
  if (r.failed()) return r.take_error();
  // Any served model (the base or an adapter) tokenizes alike.
  API_ASSIGN_OR_RETURN(const std::string lora_name, model_adapter(model, requested));
  (void)lora_name;
  API_ASSIGN_OR_RETURN(bool ok, require_tokenizer(model));
  (void)ok;
  std::vector<text::TokenId> ids;
  for (size_t i = 0; i < tokens->size(); ++i) {
    const Json& t = (*tokens)[i];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= model.tokenizer->vocab_size())
      return invalid_request("'tokens[" + std::to_string(i) + "]': not a token id of this tokenizer", "tokens");
    ids.push_back(static_cast<text::TokenId>(t.get<int64_t>()));
  }
  Expected<std::string> text = model.tokenizer->decode(ids, skip_special);
  if (!text.ok()) return invalid_request(text.error().message, "tokens");
  return Json{{"prompt", *text}};
}

void answer(const std::shared_ptr<Exchange>& exchange, const ApiExpected<Json>& result) {
  if (!result.ok()) return exchange->respond_error(result.error());
  exchange->respond_json(200, dump_json(*result));
}

}  // namespace

void handle_tokenize(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  ApiExpected<Json> body = parse_json_body(exchange->request().body);
  if (!body.ok()) return exchange->respond_error(body.error());
  answer(exchange, tokenize(*env.model, *body));
}

void handle_detokenize(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  ApiExpected<Json> body = parse_json_body(exchange->request().body);
  if (!body.ok()) return exchange->respond_error(body.error());
  answer(exchange, detokenize(*env.model, *body));
}

}  // namespace beam::server
