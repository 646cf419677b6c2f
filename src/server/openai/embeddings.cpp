// The embeddings endpoint (see embeddings.h): the inputs' engine requests and the response.
#include "server/openai/embeddings.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/base64.h"
#include "core/bf16.h"
#include "server/api/hidden_states.h"
#include "server/api/prompt_truncation.h"
#include "server/openai/completions.h"
#include "server/openai/embeddings_request.h"

namespace beam::server {
namespace {

// The state's values as floats, divided by their L2 norm when `normalize` (torch's
// F.normalize: by max(norm, 1e-12)).
std::vector<float> embedding_of(std::span<const uint16_t> state, bool normalize) {
  std::vector<float> out;
  out.reserve(state.size());
  double sum_sq = 0;
  for (uint16_t bits : state) {
    out.push_back(to_float(bf16{bits}));
    sum_sq += static_cast<double>(out.back()) * out.back();
  }
  if (normalize) {
    const double scale = 1.0 / std::max(std::sqrt(sum_sq), 1e-12);
    for (float& v : out) v = static_cast<float>(v * scale);
  }
  return out;
}

// The vector as a JSON array, or its little-endian float32 bytes in base64 (OpenAI's
// encoding_format "base64").
Json embedding_json(const std::vector<float>& values, bool base64) {
  if (!base64) return Json(values);
  std::vector<uint32_t> words(values.size());
  std::transform(values.begin(), values.end(), words.begin(),
                 [](float v) { return std::bit_cast<uint32_t>(v); });
  return base64_encode_le32(words);
}

struct EmbeddingsResponseOptions {
  std::string model;
  bool base64 = false;
  bool normalize = true;
  size_t inputs = 0;
};

class EmbeddingsObserver final : public GenerationObserver {
 public:
  EmbeddingsObserver(std::shared_ptr<Exchange> exchange, EmbeddingsResponseOptions options)
      : exchange_(std::move(exchange)), options_(std::move(options)), states_(options_.inputs) {}

  void on_rejected(const ApiError& error) override { exchange_->respond_error(error); }
  void on_delta(int32_t, SiblingDelta&&) override {}
  void on_sibling_done(int32_t sibling, SiblingResult&& result) override {
    if (result.reason == FinishReason::kError) error_ = result.error;
    if (result.hidden_states) states_[static_cast<size_t>(sibling)] = *result.hidden_states;
  }
  void on_complete(const GenerationUsage& usage) override {
    if (error_)
      return exchange_->respond_error(
          api_error(ErrorKind::kServer, "the engine failed the request: " + *error_));
    Json data = Json::array();
    for (size_t i = 0; i < states_.size(); ++i) {
      const HiddenStateRows& s = states_[i];
      if (s.rows() != 1)  // cancelled before its prompt was computed (the client left)
        return exchange_->respond_error(
            api_error(ErrorKind::kServer, "input " + std::to_string(i) + " has no embedding"));
      data.push_back(Json{{"index", i},
                          {"object", "embedding"},
                          {"embedding", embedding_json(embedding_of(s.row(0), options_.normalize),
                                                       options_.base64)}});
    }
    exchange_->note("prompt_tokens", std::to_string(usage.prompt_tokens));
    const Json body = {
        {"object", "list"},
        {"data", std::move(data)},
        {"model", options_.model},
        {"usage", {{"prompt_tokens", usage.prompt_tokens}, {"total_tokens", usage.prompt_tokens}}}};
    exchange_->respond_json(200, dump_json(body));
  }

 private:
  std::shared_ptr<Exchange> exchange_;
  EmbeddingsResponseOptions options_;
  std::vector<HiddenStateRows> states_;  // per input: its last position's state
  std::optional<std::string> error_;
};

ApiExpected<bool> run_embeddings(const EndpointEnv& env,
                                 const std::shared_ptr<Exchange>& exchange) {
  const ServedModel& model = *env.model;
  API_ASSIGN_OR_RETURN(Json body, parse_json_body(exchange->request().body));
  API_ASSIGN_OR_RETURN(EmbeddingsRequest req, parse_embeddings_request(body));
  API_ASSIGN_OR_RETURN(const std::string lora_name, model_adapter(model, req.model));
  const int64_t hidden = model.engine->config().hidden_size;
  if (req.dimensions && *req.dimensions != hidden)
    return invalid_request("'dimensions': this model's embeddings have " + std::to_string(hidden) +
                               " dimensions (its hidden size), not " +
                               std::to_string(*req.dimensions),
                           "dimensions");
  SamplingFields prefill_only;  // the prompt alone: its last position's state is the embedding
  prefill_only.params.max_tokens = 0;
  prefill_only.priority = req.priority;
  std::vector<std::vector<int32_t>> prompts;
  if (req.chat) {
    API_ASSIGN_OR_RETURN(RenderedPrompt rendered, render_chat_prompt(model, *req.chat));
    prompts.push_back(std::move(rendered.ids));
  }
  for (size_t i = 0; i < req.inputs.size(); ++i) {
    const std::string key = req.inputs.size() > 1 ? indexed_path("input", i) : "input";
    API_ASSIGN_OR_RETURN(std::vector<int32_t> ids, prompt_token_ids(model, req.inputs[i], key));
    prompts.push_back(std::move(ids));
  }
  std::vector<GenerationSpec> specs;
  for (std::vector<int32_t>& ids : prompts) {
    GenerationSpec spec;
    spec.prompt_ids = std::move(ids);
    std::string unused_text;
    API_ASSIGN_OR_RETURN(bool cut, truncate_prompt(model, req.truncate_prompt_tokens,
                                                   &spec.prompt_ids, &unused_text));
    (void)cut;
    spec.detokenize = false;
    spec.lora_name = lora_name;
    API_ASSIGN_OR_RETURN(bool ok, finish_spec(model, prefill_only, "input", &spec));
    (void)ok;
    spec.return_hidden_states = true;
    spec.hidden_size = hidden;
    spec.hidden_states_start = static_cast<int64_t>(spec.prompt_ids.size()) - 1;
    specs.push_back(std::move(spec));
  }
  EmbeddingsResponseOptions o;
  o.model = shown_model_name(model, lora_name);
  o.base64 = req.base64;
  o.normalize = req.normalize;
  o.inputs = specs.size();
  launch_generations(env, exchange, std::move(specs),
                     std::make_shared<EmbeddingsObserver>(exchange, std::move(o)));
  return true;
}

}  // namespace

void handle_embeddings(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  ApiExpected<bool> r = run_embeddings(env, exchange);
  if (!r.ok()) exchange->respond_error(r.error());
}

}  // namespace beam::server
