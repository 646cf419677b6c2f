// Legacy completions endpoint (see completions.h): one engine request per prompt, answered by
// one CompletionObserver.
#include "server/openai/completions.h"

#include <algorithm>

#include "server/api/prompt_truncation.h"
#include "server/openai/beam_search_run.h"
#include "server/openai/completion_observer.h"

namespace beam::server {
namespace {

// Token ids (the last truncate_prompt_tokens of them) and the echoed text of one prompt: the text
// as sent, or the kept ids detokenized when the prompt was token ids or was truncated.
ApiExpected<EchoedPrompt> tokenize_prompt(const ServedModel& model, const CompletionPrompt& p,
                                          const CompletionRequest& req) {
  EchoedPrompt out;
  API_ASSIGN_OR_RETURN(out.ids, prompt_token_ids(model, p, "prompt"));
  if (p.text) out.text = *p.text;
  API_ASSIGN_OR_RETURN(bool cut,
                       truncate_prompt(model, req.truncate_prompt_tokens, &out.ids, &out.text));
  if (req.echo && !p.text && !cut) {
    Expected<std::string> text = model.tokenizer->decode(out.ids, /*skip_special=*/false);
    if (!text.ok())
      return invalid_request("'prompt' cannot be echoed: " + text.error().message, "prompt");
    out.text = std::move(text).value();
  }
  return out;
}

// Which prompt positions the engine scores: from position 1 for echo with logprobs and for vLLM's
// prompt_logprobs.
std::optional<PromptLogprobsOptions> prompt_logprobs_options(const CompletionRequest& req) {
  const SamplingParams& p = req.sampling.params;
  const bool echo_logprobs = req.echo && p.logprobs;
  if (!echo_logprobs && !req.prompt_logprobs) return std::nullopt;
  const int64_t echo_top = echo_logprobs ? p.top_logprobs : 0;
  return PromptLogprobsOptions{1, std::max(echo_top, req.prompt_logprobs.value_or(0))};
}

ApiExpected<bool> run_completions(const EndpointEnv& env,
                                  const std::shared_ptr<Exchange>& exchange) {
  const ServedModel& model = *env.model;
  API_ASSIGN_OR_RETURN(Json body, parse_json_body(exchange->request().body));
  apply_sampling_defaults(model, &body);
  API_ASSIGN_OR_RETURN(CompletionRequest req, parse_completion_request(body, format_caches(model)));
  API_ASSIGN_OR_RETURN(const std::string lora_name, model_adapter(model, req.model));
  API_ASSIGN_OR_RETURN(bool ok, require_tokenizer(model));
  (void)ok;
  CompletionResponseOptions o;
  std::vector<GenerationSpec> specs;
  for (const CompletionPrompt& prompt : req.prompts) {
    API_ASSIGN_OR_RETURN(EchoedPrompt echoed, tokenize_prompt(model, prompt, req));
    GenerationSpec spec;
    spec.prompt_ids = echoed.ids;
    if (prompt.text) spec.prompt_text = echoed.text;
    spec.prompt_logprobs = prompt_logprobs_options(req);
    spec.lora_name = lora_name;
    API_ASSIGN_OR_RETURN(ok, finish_spec(model, req.sampling, "max_tokens", &spec));
    if (req.beam.enabled) {
    API_ASSIGN_OR_RETURN(ok, check_beam_search(spec, "n"));
  }
    specs.push_back(std::move(spec));
    o.prompts.push_back(std::move(echoed));
  }
  exchange->note("stream", req.stream ? "1" : "0");
  o.id = env.ids->next("cmpl-");
  o.model = shown_model_name(model, lora_name);
  o.created = unix_time_s();
  o.stream = req.stream;
  o.output = req.output;
  // Legacy logprobs=k: the chosen token plus the k most likely alternatives.
  if (req.sampling.params.logprobs) o.logprobs = req.sampling.params.top_logprobs;
  o.echo = req.echo;
  o.tokens_as_ids = req.tokens_as_ids;
  o.prompt_logprobs = req.prompt_logprobs;
  o.n = specs.front().sampling.n;
  auto observer = std::make_shared<CompletionObserver>(exchange, &*model.tokenizer, std::move(o));
  if (req.beam.enabled) {
    launch_beam_search(env, exchange, std::move(specs), req.beam, std::move(observer));
    return true;
  }
  launch_generations(env, exchange, std::move(specs), std::move(observer));
  return true;
}

}  // namespace

ApiExpected<std::vector<int32_t>> prompt_token_ids(const ServedModel& model,
                                                   const CompletionPrompt& p,
                                                   const std::string& key) {
  if (p.text) {
    API_ASSIGN_OR_RETURN(bool ok, require_tokenizer(model));
    (void)ok;
    Expected<std::vector<text::TokenId>> ids = model.tokenizer->encode(*p.text, true, true);
    if (!ids.ok())
      return invalid_request("'" + key + "' could not be tokenized: " + ids.error().message, key);
    return std::move(ids).value();
  }
  for (int32_t id : p.ids) {
    if (id >= model.vocab_size)
      return invalid_request("'" + key + "': token id " + std::to_string(id) +
                                 " is outside the vocabulary (" +
                                 std::to_string(model.vocab_size) + ")",
                             key);
  }
  return p.ids;
}

void handle_completions(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  ApiExpected<bool> r = run_completions(env, exchange);
  if (!r.ok()) exchange->respond_error(r.error());
}

}  // namespace beam::server
