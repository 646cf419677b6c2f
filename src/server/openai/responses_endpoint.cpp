// POST /v1/responses: parse, apply tool_choice, render, generate with a ResponsesObserver.
#include "server/openai/responses_observer.h"

namespace beam::server {
namespace {

ApiExpected<bool> run_responses(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  const ServedModel& model = *env.model;
  API_ASSIGN_OR_RETURN(Json body, parse_json_body(exchange->request().body));
  apply_sampling_defaults(model, &body);
  API_ASSIGN_OR_RETURN(ResponsesRequest req, parse_responses_request(body, format_caches(model)));
  GenerationSpec spec;
  API_ASSIGN_OR_RETURN(RenderedPrompt rendered,
                       prepare_chat_prompt(model, req.model, req.tool_choice, &req.prompt, &spec));
  const std::string id = env.ids->next("resp_");
  spec.tool_call_id_prefix = "call_" + id.substr(5, 12) + "_";
  spec.prompt_text = std::move(rendered.text);
  spec.prompt_ids = std::move(rendered.ids);
  API_ASSIGN_OR_RETURN(bool ok, finish_spec(model, req.sampling, "max_output_tokens", &spec));
  (void)ok;
  ResponsesOptions o;
  o.id = id;
  o.model = shown_model_name(model, spec.lora_name);
  o.created = unix_time_s();
  o.stream = req.stream;
  o.logprobs = spec.sampling.logprobs;
  o.top_logprobs = spec.sampling.top_logprobs;
  const SamplingParams& s = spec.sampling;
  o.echo = {{"instructions", req.instructions},
            {"max_output_tokens", s.max_tokens ? Json(*s.max_tokens) : Json(nullptr)},
            {"parallel_tool_calls", req.tool_choice.parallel},
            {"reasoning", req.reasoning},
            {"text", {{"format", req.text_format}}},
            {"temperature", s.temperature},
            {"tool_choice", req.tool_choice_json},
            {"tools", req.tools},
            {"top_p", s.top_p},
            {"top_logprobs", s.top_logprobs}};
  exchange->note("stream", req.stream ? "1" : "0");
  auto observer = std::make_shared<ResponsesObserver>(exchange, &*model.tokenizer, env.ids, std::move(o));
  launch_generation(env, exchange, std::move(spec), std::move(observer));
  return true;
}

}  // namespace

void handle_responses(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  ApiExpected<bool> r = run_responses(env, exchange);
  if (!r.ok()) exchange->respond_error(r.error());
}

}  // namespace beam::server
