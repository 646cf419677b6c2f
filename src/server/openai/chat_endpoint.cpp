// Chat completions endpoint (see chat_endpoint.h).
#include "server/openai/chat_endpoint.h"

#include "server/api/prompt_truncation.h"
#include "server/openai/beam_search_run.h"
#include "server/openai/chat_observer.h"
#include "server/openai/chat_request.h"

namespace beam::server {
namespace {

ApiExpected<bool> run_chat(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  const ServedModel& model = *env.model;
  API_ASSIGN_OR_RETURN(Json body, parse_json_body(exchange->request().body));
  apply_sampling_defaults(model, &body);
  API_ASSIGN_OR_RETURN(ChatRequest req, parse_chat_request(body, format_caches(model)));
  GenerationSpec spec;
  API_ASSIGN_OR_RETURN(RenderedPrompt rendered,
                       prepare_chat_prompt(model, req.model, req.tool_choice, &req.prompt, &spec));
  API_ASSIGN_OR_RETURN(
      bool cut, truncate_prompt(model, req.truncate_prompt_tokens, &rendered.ids, &rendered.text));
  (void)cut;
  const std::string id = env.ids->next("chatcmpl-");
  spec.tool_call_id_prefix = "call_" + id.substr(9, 12) + "_";
  spec.prompt_text = std::move(rendered.text);
  spec.prompt_ids = std::move(rendered.ids);
  if (req.prompt_logprobs) spec.prompt_logprobs = PromptLogprobsOptions{1, *req.prompt_logprobs};
  API_ASSIGN_OR_RETURN(bool ok, finish_spec(model, req.sampling, req.max_tokens_field, &spec));
  if (req.beam.enabled) {
    API_ASSIGN_OR_RETURN(ok, check_beam_search(spec, "n"));
  }
  (void)ok;
  ChatResponseOptions o;
  o.id = id;
  o.model = shown_model_name(model, spec.lora_name);
  o.created = unix_time_s();
  o.stream = req.stream;
  o.output = req.output;
  o.logprobs = spec.sampling.logprobs;
  o.top_logprobs = spec.sampling.top_logprobs;
  o.tokens_as_ids = req.tokens_as_ids;
  o.n = spec.sampling.n;
  o.prompt_logprobs = req.prompt_logprobs;
  o.prompt_ids = spec.prompt_ids;
  exchange->note("stream", req.stream ? "1" : "0");
  auto observer = std::make_shared<ChatObserver>(exchange, &*model.tokenizer, std::move(o));
  if (req.beam.enabled) {
    launch_beam_search(env, exchange, {std::move(spec)}, req.beam, std::move(observer));
    return true;
  }
  launch_generation(env, exchange, std::move(spec), std::move(observer));
  return true;
}

}  // namespace

void handle_chat_completions(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  ApiExpected<bool> r = run_chat(env, exchange);
  if (!r.ok()) exchange->respond_error(r.error());
}

}  // namespace beam::server
