// Beam search through the engine (see beam_search_run.h).
#include "server/openai/beam_search_run.h"

#include <algorithm>

#include "runtime/prefix_cache/prefix_cache.h"
#include "runtime/sampling/logprobs.h"
#include "server/generation/beam_search.h"
#include "server/generation/sibling_decoder.h"

namespace beam::server {
namespace {

// The replica a beam search's steps stay on when the request names none: every step extends the
// same prompt, so one replica's prefix cache serves them all (a hash of the prompt's ids).
int prompt_replica(const std::vector<int32_t>& prompt, int replicas) {
  return static_cast<int>(PrefixCache::hash_block(prompt) % static_cast<uint64_t>(replicas));
}

// One step's requests: collects each live beam's alternatives, then hands them to the run
// (`cancelled`: a step request was aborted, by /abort_request, a pause or a weight update).
class StepObserver final : public GenerationObserver {
 public:
  using Done = std::function<void(std::vector<TokenLogprobs> next, std::optional<ApiError> error,
                                  bool cancelled)>;
  StepObserver(size_t beams, Done done) : next_(beams), done_(std::move(done)) {}

  void on_rejected(const ApiError& error) override { done_({}, error, false); }
  void on_delta(int32_t, SiblingDelta&&) override {}
  void on_sibling_done(int32_t sibling, SiblingResult&& result) override {
    if (result.reason == FinishReason::kError && !error_)
      error_ = api_error(ErrorKind::kServer, "the engine failed the request: " + result.error);
    if (result.reason == FinishReason::kCancelled) cancelled_ = true;
    if (!result.tokens.empty() && result.tokens[0].logprobs)
      next_[static_cast<size_t>(sibling)] = std::move(*result.tokens[0].logprobs);
  }
  void on_complete(const GenerationUsage&) override {
    if (!error_ && !cancelled_ &&
        std::any_of(next_.begin(), next_.end(), [](const TokenLogprobs& t) { return t.top.empty(); }))
      error_ = api_error(ErrorKind::kServer, "a beam-search step has no alternatives");
    done_(std::move(next_), std::move(error_), cancelled_);
  }

 private:
  std::vector<TokenLogprobs> next_;
  std::optional<ApiError> error_;
  bool cancelled_ = false;
  Done done_;
};

class BeamSearchRun : public std::enable_shared_from_this<BeamSearchRun> {
 public:
  BeamSearchRun(const EndpointEnv& env, std::shared_ptr<Exchange> exchange,
                std::vector<GenerationSpec> specs, const BeamSearchFields& fields,
                std::shared_ptr<GenerationObserver> observer)
      : env_(env),
        exchange_(std::move(exchange)),
        specs_(std::move(specs)),
        observer_(std::move(observer)) {
    // A header that names no replica fails the first step (launch_generations checks it again).
    (void)apply_rank_header(*env_.model, exchange_->request(), specs_);
    const int replicas = env_.model->engine->data_parallel_size();
    for (GenerationSpec& s : specs_)
      if (!s.data_parallel_rank && replicas > 1)
        s.data_parallel_rank = prompt_replica(s.prompt_ids, replicas);
    for (const GenerationSpec& s : specs_) {
      BeamSearchOptions o;
      o.width = s.sampling.n;
      o.max_tokens = s.sampling.max_tokens.value_or(env_.model->max_context_tokens -
                                                    static_cast<int64_t>(s.prompt_ids.size()));
      o.length_penalty = fields.length_penalty;
      o.prompt_tokens = static_cast<int64_t>(s.prompt_ids.size());
      o.stop_ids = s.sampling.stop_token_ids;  // finish_spec added the eos ids unless ignore_eos
      searches_.emplace_back(std::move(o));
    }
  }

  // Launches the next step, or answers once every search is done.
  void step() {
    if (exchange_->disconnected())  // the exchange still finishes (as a 499)
      return observer_->on_rejected(api_error(ErrorKind::kServer, "the client left"));
    std::vector<GenerationSpec> step_specs;
    std::vector<std::pair<size_t, size_t>> owners;  // per step request: (search, live beam)
    for (size_t i = 0; i < searches_.size(); ++i) {
      if (searches_[i].done()) continue;
      for (size_t b = 0; b < searches_[i].live().size(); ++b) {
        step_specs.push_back(step_spec(i, searches_[i].live()[b]));
        owners.emplace_back(i, b);
      }
    }
    if (step_specs.empty()) return answer();
    auto self = shared_from_this();
    auto observer = std::make_shared<StepObserver>(
        step_specs.size(),
        [self, owners](std::vector<TokenLogprobs> next, std::optional<ApiError> error,
                       bool cancelled) {
          if (error) return self->observer_->on_rejected(*error);
          if (cancelled) return self->answer(/*aborted=*/true);
          self->advance(owners, std::move(next));
          self->step();
        });
    launch_generations(env_, exchange_, std::move(step_specs), std::move(observer));
  }

 private:
  // Prompt i + the beam's tokens, one token with the search's alternatives as logprobs, at the
  // request's temperature (its logprobs'), with its adapter, priority, cache salt and replica.
  GenerationSpec step_spec(size_t i, const Beam& beam) const {
    const GenerationSpec& s = specs_[i];
    GenerationSpec step;
    step.prompt_ids = s.prompt_ids;
    step.prompt_ids.insert(step.prompt_ids.end(), beam.tokens.begin(), beam.tokens.end());
    step.sampling.temperature = s.sampling.temperature;
    step.sampling.logprobs_mode = s.sampling.logprobs_mode;
    step.sampling.seed = s.sampling.seed;
    step.sampling.max_tokens = 1;
    step.sampling.ignore_eos = true;
    step.sampling.logprobs = true;
    step.sampling.top_logprobs =
        std::max(searches_[i].candidates_per_beam(), s.sampling.top_logprobs);
    step.detokenize = false;
    step.priority = s.priority;
    step.cache_salt = s.cache_salt;
    step.lora_name = s.lora_name;
    step.data_parallel_rank = s.data_parallel_rank;
    return step;
  }

  void advance(const std::vector<std::pair<size_t, size_t>>& owners,
               std::vector<TokenLogprobs> next) {
    std::vector<std::vector<TokenLogprobs>> per_search(searches_.size());
    for (size_t k = 0; k < owners.size(); ++k)
      per_search[owners[k].first].push_back(std::move(next[k]));
    for (size_t i = 0; i < searches_.size(); ++i)
      if (!searches_[i].done()) searches_[i].advance(per_search[i]);
  }

  // Each prompt's best beams to the endpoint's observer, decoded as the engine's output would be.
  // aborted: a step was cancelled; every beam not complete ends as aborted (finish "abort"), and
  // a search with fewer beams than its width so far (the first steps) pads with empty ones.
  void answer(bool aborted = false) {
    GenerationUsage usage;
    for (size_t i = 0; i < searches_.size(); ++i) {
      const GenerationSpec& spec = specs_[i];
      usage.prompt_tokens += static_cast<int64_t>(spec.prompt_ids.size());
      std::vector<Beam> best = searches_[i].best();
      if (aborted) best.resize(std::max(best.size(), static_cast<size_t>(spec.sampling.n)));
      for (size_t r = 0; r < best.size(); ++r) {
        const Beam& beam = best[r];
        TokenEvent event;
        event.tokens = beam.tokens;
        if (spec.sampling.logprobs) {
          event.logprobs = beam.logprobs;
          for (TokenLogprobs& t : event.logprobs)
            t.top.resize(std::min(t.top.size(), static_cast<size_t>(spec.sampling.top_logprobs)));
        }
        event.finish = beam.stopped ? FinishReason::kStop
                       : aborted    ? FinishReason::kCancelled
                                    : FinishReason::kLength;
        if (beam.stopped) event.stop_token = beam.tokens.back();
        event.usage.prompt_tokens = static_cast<int64_t>(spec.prompt_ids.size());
        const auto sibling = static_cast<int32_t>(i * static_cast<size_t>(spec.sampling.n) + r);
        SiblingDecoder decoder(env_.model->tokenizer ? &*env_.model->tokenizer : nullptr, spec,
                               env_.model->response_template);
        SiblingDelta delta;
        decoder.on_tokens(event, &delta);
        SiblingResult result = decoder.finish(&event, &delta);
        usage.completion_tokens += result.completion_tokens;
        if (!delta.empty()) observer_->on_delta(sibling, std::move(delta));
        observer_->on_sibling_done(sibling, std::move(result));
      }
    }
    exchange_->note("prompt_tokens", std::to_string(usage.prompt_tokens));  // not a step's
    observer_->on_complete(usage);
  }

  EndpointEnv env_;
  std::shared_ptr<Exchange> exchange_;
  std::vector<GenerationSpec> specs_;
  std::shared_ptr<GenerationObserver> observer_;
  std::vector<BeamSearch> searches_;
};

}  // namespace

ApiExpected<bool> check_beam_search(const GenerationSpec& spec, const char* n_field) {
  const auto refuse = [](const std::string& field, const std::string& why) {
    return invalid_request("'" + field + "' " + why + " with use_beam_search", field);
  };
  if (spec.sampling.n > kMaxBeamWidth)
    return refuse(n_field, "(the beam width) must be at most " + std::to_string(kMaxBeamWidth) +
                               ", got " + std::to_string(spec.sampling.n) + ",");
  if (spec.sampling.constraint || spec.tool_format.kind != ResponseFormat::Kind::kText)
    return refuse("response_format", "(or a required tool call) cannot be enforced");
  if (!spec.sampling.allowed_token_ids.empty())
    return refuse("allowed_token_ids", "is not supported");
  if (!spec.sampling.bad_words_token_ids.empty()) return refuse("bad_words", "is not supported");
  if (spec.prompt_logprobs) return refuse("prompt_logprobs", "is not supported");
  if (spec.return_routed_experts) return refuse("return_routed_experts", "is not supported");
  if (spec.return_hidden_states) return refuse("return_hidden_states", "is not supported");
  if (spec.sampling.reasoning_budget) return refuse("thinking_token_budget", "is not supported");
  return true;
}

void launch_beam_search(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange,
                        std::vector<GenerationSpec> specs, const BeamSearchFields& fields,
                        std::shared_ptr<GenerationObserver> observer) {
  std::make_shared<BeamSearchRun>(env, exchange, std::move(specs), fields, std::move(observer))
      ->step();
}

}  // namespace beam::server
