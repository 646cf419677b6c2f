// The pooling family's engine requests and vector helpers (see pooled_states.h).
#include "server/openai/pooled_states.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>

#include "core/base64.h"
#include "core/bf16.h"
#include "server/api/prompt_truncation.h"
#include "server/openai/completions.h"

namespace beam::server {
namespace {

// Collects each engine request's rows; answers through `ready` once all are in, each input
// getting the rows of the request that computed its prompt.
class PooledStatesObserver final : public GenerationObserver {
 public:
  PooledStatesObserver(std::shared_ptr<Exchange> exchange, std::vector<size_t> request_of,
                       int64_t prompt_tokens, PooledStatesReady ready)
      : exchange_(std::move(exchange)),
        request_of_(std::move(request_of)),
        prompt_tokens_(prompt_tokens),
        ready_(std::move(ready)) {}

  void on_rejected(const ApiError& error) override { exchange_->respond_error(error); }
  void on_delta(int32_t, SiblingDelta&&) override {}
  void on_sibling_done(int32_t sibling, SiblingResult&& result) override {
    if (result.reason == FinishReason::kError) error_ = result.error;
    if (result.reason == FinishReason::kCancelled) cancelled_ = true;
    if (result.hidden_states) rows_[sibling] = std::move(*result.hidden_states);
  }
  void on_complete(const GenerationUsage& engine_usage) override {
    if (error_)
      return exchange_->respond_error(
          api_error(ErrorKind::kServer, "the engine failed the request: " + *error_));
    std::vector<HiddenStateRows> states;
    states.reserve(request_of_.size());
    for (size_t i = 0; i < request_of_.size(); ++i) {
      const auto it = rows_.find(static_cast<int32_t>(request_of_[i]));
      if (it == rows_.end() || it->second.rows() == 0)
        return exchange_->respond_error(
            cancelled_ ? request_aborted("input " + std::to_string(i) + "'s prompt ran")
                       : api_error(ErrorKind::kServer,
                                   "input " + std::to_string(i) + " has no hidden states"));
      states.push_back(it->second);
    }
    GenerationUsage usage;
    usage.prompt_tokens = prompt_tokens_;  // every input's, shared prompts counted each time
    usage.cached_prompt_tokens = std::min(engine_usage.cached_prompt_tokens, prompt_tokens_);
    exchange_->note("prompt_tokens", std::to_string(prompt_tokens_));
    ready_(std::move(states), usage);
  }

 private:
  std::shared_ptr<Exchange> exchange_;
  std::vector<size_t> request_of_;  // per input: the engine request (sibling) computing it
  int64_t prompt_tokens_;
  PooledStatesReady ready_;
  std::map<int32_t, HiddenStateRows> rows_;
  std::optional<std::string> error_;
  bool cancelled_ = false;  // an engine request was aborted (its rows may be missing)
};

}  // namespace

ApiExpected<bool> add_prompt_ids(const ServedModel& model,
                                 const std::vector<CompletionPrompt>& prompts,
                                 const std::string& key, PoolingJob* job) {
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string name = prompts.size() > 1 ? indexed_path(key, i) : key;
    API_ASSIGN_OR_RETURN(std::vector<int32_t> ids, prompt_token_ids(model, prompts[i], name));
    job->prompts.push_back(std::move(ids));
    job->keys.push_back(name);
  }
  return true;
}

ApiExpected<bool> launch_pooling(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange,
                                 PoolingJob job, PooledStatesReady ready) {
  const ServedModel& model = *env.model;
  const int64_t hidden = model.engine->config().hidden_size;
  SamplingFields prefill_only;  // the prompt alone: max_tokens 0
  prefill_only.params.max_tokens = 0;
  prefill_only.priority = job.priority;
  std::vector<GenerationSpec> specs;
  std::vector<size_t> request_of;                            // per input
  std::map<std::vector<int32_t>, size_t> request_by_prompt;  // identical prompts run once
  int64_t prompt_tokens = 0, recorded_rows = 0;
  for (size_t i = 0; i < job.prompts.size(); ++i) {
    const std::string& key = job.keys.at(i);
    std::vector<int32_t> ids = std::move(job.prompts[i]);
    std::string unused_text;
    API_ASSIGN_OR_RETURN(bool cut,
                         truncate_prompt(model, job.truncate_prompt_tokens, &ids, &unused_text));
    (void)cut;
    if (ids.empty())
      return invalid_request("'" + key + "' has no tokens: there is no hidden state to pool", key);
    prompt_tokens += static_cast<int64_t>(ids.size());
    const auto [at, added] = request_by_prompt.try_emplace(ids, specs.size());
    request_of.push_back(at->second);
    if (!added) continue;
    GenerationSpec spec;
    spec.prompt_ids = std::move(ids);
    spec.detokenize = false;
    spec.lora_name = job.lora_name;
    API_ASSIGN_OR_RETURN(bool fits, finish_spec(model, prefill_only, key.c_str(), &spec));
    (void)fits;
    spec.return_hidden_states = true;
    spec.hidden_size = hidden;
    const auto prompt = static_cast<int64_t>(spec.prompt_ids.size());
    spec.hidden_states_start = job.pooling == Pooling::kLast ? prompt - 1 : 0;
    recorded_rows += job.pooling == Pooling::kLast ? 1 : prompt;
    specs.push_back(std::move(spec));
  }
  if (specs.empty()) return invalid_request("'" + job.field + "' is empty", job.field);
  if (recorded_rows * hidden > kMaxPooledValues)
    return invalid_request("'" + job.field + "': " + std::to_string(recorded_rows) +
                               " positions of " + std::to_string(hidden) +
                               " values would be more than the " +
                               std::to_string(kMaxPooledValues >> 20) +
                               "Mi values one response may hold; send fewer or shorter inputs "
                               "(or truncate_prompt_tokens)",
                           job.field);
  launch_generations(env, exchange, std::move(specs),
                     std::make_shared<PooledStatesObserver>(exchange, std::move(request_of),
                                                            prompt_tokens, std::move(ready)));
  return true;
}

std::vector<float> pooled_vector(std::span<const uint16_t> state, bool normalize) {
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

Json float_vector_json(const std::vector<float>& values, bool base64) {
  if (!base64) return Json(values);
  std::vector<uint32_t> words(values.size());
  std::transform(values.begin(), values.end(), words.begin(),
                 [](float v) { return std::bit_cast<uint32_t>(v); });
  return base64_encode_le32(words);
}

Json pooled_usage_json(const GenerationUsage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens}, {"total_tokens", usage.prompt_tokens}};
}

double cosine_similarity(std::span<const uint16_t> a, std::span<const uint16_t> b) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double x = to_float(bf16{a[i]}), y = to_float(bf16{b[i]});
    dot += x * y;
    aa += x * x;
    bb += y * y;
  }
  return aa > 0 && bb > 0 ? dot / std::sqrt(aa * bb) : 0.0;
}

}  // namespace beam::server
