// POST /v1/messages and /v1/messages/count_tokens (see messages_observer.h).
#include "server/anthropic/messages_observer.h"
#include "server/anthropic/messages_request.h"

namespace beam::server {
namespace {

ApiExpected<RenderedPrompt> prepare(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange, bool count_only,
                                    MessagesRequest* req, GenerationSpec* spec) {
  const ServedModel& model = *env.model;
  API_ASSIGN_OR_RETURN(Json body, parse_json_body(exchange->request().body));
  apply_sampling_defaults(model, &body);
  API_ASSIGN_OR_RETURN(*req, parse_messages_request(body, count_only, format_caches(model)));
  return prepare_chat_prompt(model, req->model, req->tool_choice, &req->prompt, spec);
}

ApiExpected<bool> run(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  MessagesRequest req;
  GenerationSpec spec;
  API_ASSIGN_OR_RETURN(RenderedPrompt rendered, prepare(env, exchange, false, &req, &spec));
  const std::string id = env.ids->next("msg_");
  spec.tool_call_id_prefix = "toolu_" + id.substr(4, 12) + "_";
  spec.prompt_text = std::move(rendered.text);
  spec.prompt_ids = std::move(rendered.ids);
  API_ASSIGN_OR_RETURN(bool ok, finish_spec(*env.model, req.sampling, "max_tokens", &spec));
  (void)ok;
  if (spec.sampling.n != 1) return invalid_request("'n' is not part of the Messages API", "n");
  MessagesOptions o;
  o.id = id;
  o.model = shown_model_name(*env.model, spec.lora_name);
  o.stream = req.stream;
  o.stop_sequences = spec.stop_strings;
  exchange->note("stream", req.stream ? "1" : "0");
  auto observer = std::make_shared<MessagesObserver>(exchange, std::move(o), static_cast<int64_t>(spec.prompt_ids.size()));
  launch_generation(env, exchange, std::move(spec), std::move(observer));
  return true;
}

}  // namespace

void handle_messages(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  ApiExpected<bool> r = run(env, exchange);
  if (!r.ok()) exchange->respond_error(r.error());
}

void handle_count_tokens(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  MessagesRequest req;
  GenerationSpec spec;
  ApiExpected<RenderedPrompt> rendered = prepare(env, exchange, true, &req, &spec);
  if (!rendered.ok()) return exchange->respond_error(rendered.error());
  exchange->respond_json(200, dump_json(Json{{"input_tokens", rendered->ids.size()}}));
}

}  // namespace beam::server
