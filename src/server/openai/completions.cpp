// Legacy completions: request parsing, observer and endpoint (see completions.h).
#include "server/openai/completions.h"

#include "server/api/routed_experts.h"
#include "server/http/sse.h"
#include "server/openai/chat_observer.h"
#include "server/openai/logprobs_json.h"

namespace beam::server {
namespace {

constexpr int64_t kDefaultCompletionMaxTokens = 16;  // OpenAI's default for /v1/completions

ApiExpected<bool> read_prompt(const Json* prompt, CompletionRequest* req) {
  if (!prompt) return invalid_request("'prompt' is required", "prompt");
  const Json* p = prompt;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  if (p->is_string()) {
    req->prompt_text = p->get<std::string>();
    if (req->prompt_text->empty()) return invalid_request("'prompt' must not be empty", "prompt");
    return true;
  }
  if (p->is_array()) {
    for (size_t i = 0; i < p->size(); ++i) {
      const Json& e = (*p)[i];
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > INT32_MAX) {
        if (e.is_string() || e.is_array())
          return invalid_request("'prompt': batched prompts are not supported; send one request per prompt", "prompt");
        return invalid_request("'prompt[" + std::to_string(i) + "]': expected a token id", "prompt");
      }
      req->prompt_ids.push_back(static_cast<int32_t>(e.get<int64_t>()));
    }
    if (req->prompt_ids.empty()) return invalid_request("'prompt' must not be empty", "prompt");
    return true;
  }
  return invalid_request(std::string("'prompt': expected a string or an array of token ids, got ") + json_type_name(*p), "prompt");
}

class CompletionObserver : public GenerationObserver {
 public:
  CompletionObserver(std::shared_ptr<Exchange> exchange, const text::Tokenizer* tokenizer, std::string id,
                     std::string model, bool stream, bool include_usage, int64_t logprobs, int64_t n)
      : exchange_(std::move(exchange)), tokenizer_(tokenizer), id_(std::move(id)), model_(std::move(model)),
        stream_(stream), include_usage_(include_usage), logprobs_(logprobs), created_(unix_time_s()),
        results_(static_cast<size_t>(n)) {
    for (int64_t i = 0; i < n; ++i) builders_.emplace_back(tokenizer_, logprobs_ > 0 ? logprobs_ - 1 : 0);
  }

  void on_rejected(const ApiError& error) override { exchange_->respond_error(error); }

  void on_delta(int32_t sibling, SiblingDelta&& delta) override {
    if (!stream_) return;
    std::string text;
    for (const ResponseDelta& p : delta.parts) text += p.text;
    Json logprobs = logprobs_ > 0 ? builders_[static_cast<size_t>(sibling)].add(delta.tokens) : Json(nullptr);
    send(sibling, text, std::move(logprobs), nullptr);
  }

  void on_sibling_done(int32_t sibling, SiblingResult&& result) override {
    if (result.reason == FinishReason::kError) error_ = result.error;
    // An engine failure before any output becomes an error response instead of a stream.
    if (stream_ && (exchange_->stream_started() || result.reason != FinishReason::kError)) {
      send(sibling, "", nullptr, finish_reason(result), &result.routed_experts);
    }
    results_[static_cast<size_t>(sibling)] = std::move(result);
  }

  void on_complete(const GenerationUsage& usage) override {
    exchange_->note("completion_tokens", std::to_string(usage.completion_tokens));
    if (error_ && !exchange_->stream_started()) {
      exchange_->respond_error(api_error(ErrorKind::kServer, "the engine failed the request: " + *error_));
      return;
    }
    if (stream_) {
      end_openai_stream(*exchange_, error_, include_usage_ ? chunk(Json::array()) : Json(nullptr),
                        usage);
      return;
    }
    Json choices = Json::array();
    for (size_t i = 0; i < results_.size(); ++i) {
      Json logprobs = nullptr;
      if (logprobs_ > 0) {
        CompletionLogprobs b(tokenizer_, logprobs_ - 1);
        logprobs = b.add(results_[i].tokens);
      }
      choices.push_back(Json{{"index", i}, {"text", results_[i].parsed.content}, {"logprobs", std::move(logprobs)},
                             {"finish_reason", finish_reason(results_[i])}});
      add_routed_experts(results_[i].routed_experts, choices.back());
    }
    Json body = chunk(std::move(choices));
    body["usage"] = openai_usage(usage);
    exchange_->respond_json(200, dump_json(body));
  }

 private:
  static std::string finish_reason(const SiblingResult& r) {
    std::string s = chat_finish_reason(r);
    return s == "tool_calls" ? "stop" : s;
  }
  Json chunk(Json choices) const {
    Json c = {{"id", id_}, {"object", "text_completion"}, {"created", created_}, {"model", model_},
              {"choices", std::move(choices)}};
    if (stream_ && include_usage_) c["usage"] = nullptr;
    return c;
  }
  void send(int32_t sibling, const std::string& text, Json logprobs, Json finish,
            const std::optional<std::vector<int32_t>>* routed_experts = nullptr) {
    if (!exchange_->stream_started()) exchange_->start_stream(std::string(http::kSseContentType));
    Json choice = {{"index", sibling}, {"text", text}, {"logprobs", std::move(logprobs)}, {"finish_reason", std::move(finish)}};
    if (routed_experts) add_routed_experts(*routed_experts, choice);
    exchange_->send(http::sse_data(dump_json(chunk(Json::array({std::move(choice)})))));
  }

  std::shared_ptr<Exchange> exchange_;
  const text::Tokenizer* tokenizer_;
  std::string id_, model_;
  bool stream_, include_usage_;
  int64_t logprobs_;  // 0: off; k: entries carry k - 1 alternatives (legacy logprobs=k-1)
  int64_t created_;
  std::vector<SiblingResult> results_;
  std::vector<CompletionLogprobs> builders_;
  std::optional<std::string> error_;
};

ApiExpected<bool> run(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  const ServedModel& model = *env.model;
  API_ASSIGN_OR_RETURN(Json body, parse_json_body(exchange->request().body));
  apply_sampling_defaults(model, &body);
  API_ASSIGN_OR_RETURN(CompletionRequest req, parse_completion_request(body));
  API_ASSIGN_OR_RETURN(bool ok, check_model_name(model, req.model));
  API_ASSIGN_OR_RETURN(ok, require_tokenizer(model));
  GenerationSpec spec;
  if (req.prompt_text) {
    Expected<std::vector<text::TokenId>> ids = model.tokenizer->encode(*req.prompt_text, true, true);
    if (!ids.ok()) return invalid_request("the prompt could not be tokenized: " + ids.error().message, "prompt");
    spec.prompt_ids = std::move(ids).value();
    spec.prompt_text = *req.prompt_text;
  } else {
    for (int32_t id : req.prompt_ids) {
      if (id >= model.vocab_size)
        return invalid_request("'prompt': token id " + std::to_string(id) + " is outside the vocabulary (" +
                               std::to_string(model.vocab_size) + ")", "prompt");
    }
    spec.prompt_ids = req.prompt_ids;
  }
  API_ASSIGN_OR_RETURN(ok, finish_spec(model, req.sampling, "max_tokens", &spec));
  (void)ok;
  exchange->note("stream", req.stream ? "1" : "0");
  // Legacy logprobs=k asks for the chosen token plus the k most likely alternatives.
  const int64_t logprobs = spec.sampling.logprobs ? spec.sampling.top_logprobs + 1 : 0;
  auto observer = std::make_shared<CompletionObserver>(exchange, &*model.tokenizer, env.ids->next("cmpl-"), model.name,
                                                       req.stream, req.include_usage, logprobs, spec.sampling.n);
  launch_generation(env, exchange, std::move(spec), std::move(observer));
  return true;
}

}  // namespace

ApiExpected<CompletionRequest> parse_completion_request(const Json& body) {
  if (!body.is_object()) return invalid_request("the request body must be a JSON object");
  CompletionRequest req;
  FieldReader r(body, "");
  r.read("model", &req.model);
  read_sampling_fields(r, "stop", &req.sampling);
  read_routed_experts_fields(r, &req.sampling);
  std::optional<int64_t> max_tokens = kDefaultCompletionMaxTokens;
  r.read("max_tokens", &max_tokens);
  req.sampling.params.max_tokens = max_tokens;
  std::optional<int64_t> logprobs;
  r.read("logprobs", &logprobs);
  if (logprobs) {
    if (*logprobs < 0 || *logprobs > kMaxTopLogprobs) r.fail("logprobs", "must be in [0, 20], got " + std::to_string(*logprobs));
    req.sampling.params.logprobs = true;
    req.sampling.params.top_logprobs = *logprobs;
  }
  bool echo = false;
  r.read("echo", &echo);
  if (echo) r.fail("echo", "is not supported by beamserve");
  if (r.has("suffix")) r.fail("suffix", "is not supported by beamserve");
  std::optional<int64_t> best_of;
  r.read("best_of", &best_of);
  if (best_of && *best_of != req.sampling.params.n) r.fail("best_of", "is not supported (only best_of == n)");
  r.read("stream", &req.stream);
  if (const Json* so = r.get("stream_options")) {
    FieldReader s(*so, "stream_options");
    s.read("include_usage", &req.include_usage);
    if (s.failed()) return s.take_error();
  }
  if (r.failed()) return r.take_error();
  API_ASSIGN_OR_RETURN(bool ok, read_prompt(r.get("prompt"), &req));
  (void)ok;
  // vLLM's extension: the chat format's response_format on completions too, and vLLM's / SGLang's
  // structured-output fields (parse_request_format).
  API_ASSIGN_OR_RETURN(req.sampling.format, parse_request_format(body));
  return req;
}

void handle_completions(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  ApiExpected<bool> r = run(env, exchange);
  if (!r.ok()) exchange->respond_error(r.error());
}

}  // namespace beam::server
