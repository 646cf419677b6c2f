// POST /generate: token ids in, token ids (+ text when the model has a tokenizer, + logprobs, +
// prompt logprobs) out (see native_endpoints.h). Stop strings work when the model has a tokenizer.
// A body in SGLang's format goes to sglang_generate_request.h / sglang_generate_observer.h.
#include <algorithm>

#include "server/api/hidden_states.h"
#include "server/api/routed_experts.h"
#include "server/http/sse.h"
#include "server/native/native_endpoints.h"
#include "server/native/sglang_generate_observer.h"
#include "server/native/sglang_generate_request.h"
#include "server/openai/logprobs_json.h"

namespace beam::server {
namespace {

Json native_logprobs(const std::vector<OutputToken>& tokens, int64_t num_top) {
  Json out = Json::array();
  for (const OutputToken& t : tokens) {
    if (t.logprobs) out.push_back(native_logprob_entry(*t.logprobs, num_top));
  }
  return out;
}

// SGLang-style prompt logprobs: positions [first, prompt length) with `num_top` alternatives;
// the engine scores from max(first, 1) (position 0 has no logprob).
struct NativePromptLogprobs {
  int64_t first = 0;
  int64_t num_top = 0;
};

// Each token's logprobs of the request's token_ids_logprob: [[{token_id, logprob}, ...], ...].
Json native_token_ids_logprobs(const std::vector<OutputToken>& tokens) {
  Json out = Json::array();
  for (const OutputToken& t : tokens) {
    Json ids = Json::array();
    for (const TokenLogprob& e : t.token_ids_logprobs)
      ids.push_back(Json{{"token_id", e.token}, {"logprob", json_logprob(e.logprob)}});
    out.push_back(std::move(ids));
  }
  return out;
}

Json token_ids(const std::vector<OutputToken>& tokens) {
  Json ids = Json::array();
  for (const OutputToken& t : tokens) ids.push_back(t.id);
  return ids;
}

class GenerateObserver : public GenerationObserver {
 public:
  GenerateObserver(std::shared_ptr<Exchange> exchange, std::string id, bool stream, bool with_text,
                   bool logprobs, bool entropy, bool token_ids, int64_t top_logprobs, int64_t n,
                   int64_t prompt_tokens, std::optional<NativePromptLogprobs> prompt_logprobs)
      : exchange_(std::move(exchange)),
        id_(std::move(id)),
        stream_(stream),
        with_text_(with_text),
        logprobs_(logprobs),
        entropy_(entropy),
        token_ids_(token_ids),
        top_logprobs_(top_logprobs),
        results_(static_cast<size_t>(n)),
        started_(static_cast<size_t>(n), false),
        prompt_tokens_(prompt_tokens),
        prompt_logprobs_(prompt_logprobs) {}

  void on_rejected(const ApiError& error) override { exchange_->respond_error(error); }

  void on_delta(int32_t sibling, SiblingDelta&& delta) override {
    if (!stream_) return;
    Json c = {{"index", sibling}, {"token_ids", token_ids(delta.tokens)}};
    if (with_text_) {
      std::string text;
      for (const ResponseDelta& p : delta.parts) text += p.text;
      c["text"] = text;
    }
    if (logprobs_) c["logprobs"] = native_logprobs(delta.tokens, top_logprobs_);
    if (entropy_) c["entropy"] = token_entropies(delta.tokens);
    if (token_ids_) c["token_ids_logprobs"] = native_token_ids_logprobs(delta.tokens);
    add_prompt_logprobs(sibling, delta.prompt_logprobs, c);
    c["finish_reason"] = nullptr;
    send(c);
  }

  void on_sibling_done(int32_t sibling, SiblingResult&& result) override {
    if (result.reason == FinishReason::kError) error_ = result.error;
    if (stream_ && (exchange_->stream_started() || result.reason != FinishReason::kError)) {
      Json c = {{"index", sibling}, {"token_ids", Json::array()}};
      add_prompt_logprobs(sibling, result.prompt_logprobs, c);
      c["finish_reason"] = finish_reason_name(result.reason);
      c["stop_token"] = result.stop_token ? Json(*result.stop_token) : Json(nullptr);
      if (result.routed_experts)
        c["routed_experts"] = encode_routed_experts(*result.routed_experts);
      if (result.hidden_states) c["hidden_states"] = encode_hidden_states(*result.hidden_states);
      send(c);
    }
    results_[static_cast<size_t>(sibling)] = std::move(result);
  }

  void on_complete(const GenerationUsage& usage) override {
    exchange_->note("completion_tokens", std::to_string(usage.completion_tokens));
    Json u = {{"prompt_tokens", usage.prompt_tokens}, {"cached_tokens", usage.cached_prompt_tokens},
              {"completion_tokens", usage.completion_tokens}};
    if (error_ && !exchange_->stream_started()) {
      return exchange_->respond_error(api_error(ErrorKind::kServer, "the engine failed the request: " + *error_));
    }
    if (stream_) {
      send(Json{{"usage", u}});
      exchange_->send(http::sse_done());
      return exchange_->end_stream();
    }
    Json choices = Json::array();
    for (size_t i = 0; i < results_.size(); ++i) {
      const SiblingResult& r = results_[i];
      Json c = {{"index", i}, {"token_ids", token_ids(r.tokens)}};
      if (with_text_) c["text"] = r.parsed.content;
      c["logprobs"] = logprobs_ ? native_logprobs(r.tokens, top_logprobs_) : Json(nullptr);
      if (entropy_) c["entropy"] = token_entropies(r.tokens);
      if (token_ids_) c["token_ids_logprobs"] = native_token_ids_logprobs(r.tokens);
      if (prompt_logprobs_) c["prompt_logprobs"] = prompt_logprobs_json(r.prompt_logprobs);
      c["finish_reason"] = finish_reason_name(r.reason);
      c["stop_token"] = r.stop_token ? Json(*r.stop_token) : Json(nullptr);
      if (r.routed_experts) c["routed_experts"] = encode_routed_experts(*r.routed_experts);
      if (r.hidden_states) c["hidden_states"] = encode_hidden_states(*r.hidden_states);
      choices.push_back(std::move(c));
    }
    exchange_->respond_json(200, dump_json(Json{{"id", id_}, {"choices", std::move(choices)}, {"usage", u}}));
  }

 private:
  Json prompt_logprobs_json(const std::vector<TokenLogprobs>& entries) const {
    const NativePromptLogprobs& p = *prompt_logprobs_;
    return native_prompt_logprobs(prompt_tokens_, p.first, std::max<int64_t>(p.first, 1), entries,
                                  p.num_top);
  }
  // A streamed choice's first chunk carries its prompt logprobs.
  void add_prompt_logprobs(int32_t sibling, const std::vector<TokenLogprobs>& entries,
                           Json& chunk) {
    const auto s = static_cast<size_t>(sibling);
    if (started_[s]) return;
    started_[s] = true;
    if (prompt_logprobs_) chunk["prompt_logprobs"] = prompt_logprobs_json(entries);
  }
  void send(const Json& chunk) {
    if (!exchange_->stream_started()) exchange_->start_stream(std::string(http::kSseContentType));
    exchange_->send(http::sse_data(dump_json(chunk)));
  }

  std::shared_ptr<Exchange> exchange_;
  std::string id_;
  bool stream_, with_text_, logprobs_, entropy_;
  bool token_ids_;  // the request's token_ids_logprob is not empty
  int64_t top_logprobs_;
  std::vector<SiblingResult> results_;
  std::vector<bool> started_;  // streaming: the choice's first chunk went out
  int64_t prompt_tokens_;
  std::optional<NativePromptLogprobs> prompt_logprobs_;
  std::optional<std::string> error_;
};

// prompt_logprobs: true (no alternatives), false, or the number of alternatives in [0, 20];
// logprob_start_len: the first prompt position reported (SGLang's; -1, its default, means none).
std::optional<NativePromptLogprobs> read_prompt_logprobs(FieldReader& r) {
  std::optional<NativePromptLogprobs> out;
  if (const Json* v = r.get("prompt_logprobs")) {
    if (v->is_boolean()) {
      if (v->get<bool>()) out = NativePromptLogprobs{};
    } else if (v->is_number_integer()) {
      const auto k = v->get<int64_t>();
      if (k < 0 || k > kMaxTopLogprobs) {
        r.fail("prompt_logprobs",
               "must be true, false or the number of alternatives in [0, 20], got " +
                   std::to_string(k));
      }
      out = NativePromptLogprobs{0, k};
    } else {
      r.fail_type("prompt_logprobs", "a boolean or an integer in [0, 20]", *v);
    }
  }
  std::optional<int64_t> start;
  r.read("logprob_start_len", &start);
  if (!start || *start == -1) return out;
  if (*start < 0) {
    r.fail("logprob_start_len", "must be >= 0, got " + std::to_string(*start));
  } else if (!out) {
    r.fail("logprob_start_len", "needs 'prompt_logprobs' (true or a number of alternatives)");
  } else {
    out->first = *start;
  }
  return out;
}

ApiExpected<bool> run_native(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange,
                             Json body) {
  const ServedModel& model = *env.model;
  apply_sampling_defaults(model, &body);
  if (!body.is_object()) return invalid_request("the request body must be a JSON object");
  FieldReader r(body, "");
  std::string requested;
  r.read("model", &requested);
  SamplingFields fields;
  read_sampling_fields(r, "stop", &fields);
  read_routed_experts_fields(r, &fields);
  r.read("max_tokens", &fields.params.max_tokens);
  r.read("logprobs", &fields.params.logprobs);
  r.read("top_logprobs", &fields.params.top_logprobs);
  r.read("return_entropy", &fields.params.return_entropy);
  read_token_ids(r, "token_ids_logprob", &fields.params.token_ids_logprob);
  const std::optional<NativePromptLogprobs> prompt_logprobs = read_prompt_logprobs(r);
  if (const std::optional<int64_t>& m = fields.params.max_tokens;
      m && *m < (prompt_logprobs ? 0 : 1)) {
    r.fail("max_tokens",
           "must be >= 1 (0, scoring only, needs 'prompt_logprobs'), got " + std::to_string(*m));
  }
  bool stream = false;
  r.read("stream", &stream);
  const char* key = r.has("input_ids") ? "input_ids" : "prompt_token_ids";
  const Json* ids = r.get(key);
  if (!ids) r.fail("input_ids", "is required (an array of token ids)");
  else if (!ids->is_array() || ids->empty()) r.fail(key, "expected a non-empty array of token ids");
  if (r.failed()) return r.take_error();
  GenerationSpec spec;
  API_ASSIGN_OR_RETURN(spec.lora_name, model_adapter(model, requested));
  for (size_t i = 0; i < ids->size(); ++i) {
    const Json& t = (*ids)[i];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= model.vocab_size)
      return invalid_request(std::string("'") + key + "[" + std::to_string(i) + "]': not a token id in [0, " +
                             std::to_string(model.vocab_size) + ")", key);
    spec.prompt_ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  spec.detokenize = model.tokenizer.has_value();
  if (!spec.detokenize && !fields.stop_strings.empty())
    return invalid_request("'stop': stop strings need a tokenizer; this model has none (use stop_token_ids)", "stop");
  const auto prompt_tokens = static_cast<int64_t>(spec.prompt_ids.size());
  if (prompt_logprobs) {
    if (prompt_logprobs->first >= prompt_tokens)
      return invalid_request("'logprob_start_len' (" + std::to_string(prompt_logprobs->first) +
                                 ") must be less than the prompt's length (" +
                                 std::to_string(prompt_tokens) + ")",
                             "logprob_start_len");
    spec.prompt_logprobs = PromptLogprobsOptions{std::max<int64_t>(prompt_logprobs->first, 1),
                                                 prompt_logprobs->num_top};
  }
  API_ASSIGN_OR_RETURN(bool ok, finish_spec(model, fields, "max_tokens", &spec));
  (void)ok;
  exchange->note("stream", stream ? "1" : "0");
  auto observer = std::make_shared<GenerateObserver>(
      exchange, env.ids->next("gen-"), stream, spec.detokenize, spec.sampling.logprobs,
      spec.sampling.return_entropy, !spec.sampling.token_ids_logprob.empty(),
      spec.sampling.top_logprobs, spec.sampling.n, prompt_tokens,
      prompt_logprobs);
  launch_generation(env, exchange, std::move(spec), std::move(observer));
  return true;
}

// SGLang's lora_path: a loaded adapter by its name or by the directory it was loaded from, or
// the resolver's adapter of that name (--lora-resolver-dir).
ApiExpected<std::string> sglang_lora(const ServedModel& model, const std::string& lora_path) {
  for (const LoraAdapterInfo& a : served_adapters(model))
    if (a.name == lora_path || a.path == lora_path) return a.name;
  API_ASSIGN_OR_RETURN(const std::optional<std::string> resolved,
                       resolve_adapter(model, lora_path));
  if (resolved) return *resolved;
  return api_error(ErrorKind::kNotFound,
                   "'lora_path': no LoRA adapter named or loaded from '" + lora_path +
                       "' (load it with POST /load_lora_adapter or --lora-modules)",
                   "lora_path", "model_not_found");
}

ApiExpected<bool> run_sglang(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange,
                             const Json& body) {
  const ServedModel& model = *env.model;
  SglangModelInfo info;
  info.tokenizer = model.tokenizer ? &*model.tokenizer : nullptr;
  info.vocab_size = model.vocab_size;
  info.max_context_tokens = model.max_context_tokens;
  info.sampling_defaults = model.sampling_defaults;
  info.format_caches = format_caches(model);
  API_ASSIGN_OR_RETURN(SglangGenerateRequest req, parse_sglang_generate_request(body, info));
  API_ASSIGN_OR_RETURN(const std::string model_lora, model_adapter(model, req.model));
  std::vector<GenerationSpec> specs;
  for (const SglangItem& item : req.items) {
    API_ASSIGN_OR_RETURN(GenerationSpec spec, sglang_generation_spec(model, item));
    spec.lora_name = model_lora;
    if (!item.lora_path.empty()) {
      API_ASSIGN_OR_RETURN(spec.lora_name, sglang_lora(model, item.lora_path));
      spec.lora_param = "lora_path";
    }
    specs.push_back(std::move(spec));
  }
  // meta_info.id: the rid (n == 1), else a new id per sample (SGLang regenerates them for n > 1).
  std::vector<std::string> ids;
  for (const SglangItem& item : req.items) {
    for (int64_t j = 0; j < req.n; ++j) ids.push_back(item.rid ? *item.rid : env.ids->next(""));
  }
  exchange->note("stream", req.stream ? "1" : "0");
  auto observer = std::make_shared<SglangGenerateObserver>(exchange, std::move(req), std::move(ids),
                                                           info.tokenizer, model.weights);
  launch_generations(env, exchange, std::move(specs), std::move(observer));
  return true;
}

ApiExpected<bool> run(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  API_ASSIGN_OR_RETURN(Json body, parse_json_body(exchange->request().body));
  if (is_sglang_generate_body(body)) return run_sglang(env, exchange, body);
  return run_native(env, exchange, std::move(body));
}

}  // namespace

void handle_generate(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  ApiExpected<bool> r = run(env, exchange);
  if (!r.ok()) exchange->respond_error(r.error());
}

}  // namespace beam::server
