// GenerationJob (see generation_job.h).
#include "server/generation/generation_job.h"

#include <boost/asio/post.hpp>

#include "core/logging.h"
#include "runtime/lora_registry.h"

namespace beam::server {

GenerationJob::GenerationJob(const GenerationContext& context, WorkStrand strand, GenerationSpec spec,
                             std::shared_ptr<GenerationObserver> observer, Clock::time_point received)
    : context_(context),
      strand_(std::move(strand)),
      spec_(std::move(spec)),
      observer_(std::move(observer)),
      received_(received) {}

void GenerationJob::start() {
  boost::asio::post(strand_, [self = shared_from_this()] { self->submit(); });
}

void GenerationJob::cancel() {
  if (cancelled_.exchange(true)) return;
  const int64_t id = request_id_.load();
  if (id >= 0) context_.engine->cancel(RequestId(id));
}

void GenerationJob::submit() {
  const int64_t n = spec_.sampling.n;
  decoders_.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    decoders_.emplace_back(context_.tokenizer, spec_, context_.response_template);
  }
  last_event_.assign(static_cast<size_t>(n), std::nullopt);
  siblings_left_ = n;
  GenerateRequest request;
  request.prompt = spec_.prompt_ids;
  request.sampling = spec_.sampling;
  request.priority = spec_.priority;
  request.cache_salt = spec_.cache_salt;
  request.data_parallel_rank = spec_.data_parallel_rank;
  request.lora_name = spec_.lora_name;
  request.return_routed_experts = spec_.return_routed_experts;
  request.routed_experts_start = spec_.routed_experts_start;
  request.return_hidden_states = spec_.return_hidden_states;
  request.hidden_states_start = spec_.hidden_states_start;
  request.prompt_logprobs = spec_.prompt_logprobs;
  // The sink runs on the engine thread: hand the event to this job's strand and return.
  request.sink = [self = shared_from_this()](TokenEvent&& event) {
    boost::asio::post(self->strand_, [self, event = std::move(event)]() mutable { self->handle(std::move(event)); });
  };
  Expected<RequestId> id = context_.engine->submit(std::move(request));
  if (!id.ok()) {
    const std::string& why = id.error().message;
    const bool unloaded = !spec_.lora_name.empty() && why == lora_not_loaded(spec_.lora_name);
    observer_->on_rejected(unloaded ? api_error(ErrorKind::kNotFound, why, spec_.lora_param,
                                                "model_not_found")
                                    : invalid_request(why));
    observer_.reset();
    return;
  }
  if (context_.counters->active.fetch_add(1) == 0) {
    const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    context_.counters->busy_since_unix_s.store(now);
  }
  request_id_.store(id->value);
  if (context_.jobs) context_.jobs->add(spec_.rid, shared_from_this());
  if (cancelled_.load()) context_.engine->cancel(*id);
}

void GenerationJob::record_timing(const TokenEvent& event) {
  if (event.tokens.empty()) return;
  const Clock::time_point now = Clock::now();
  if (!first_token_seen_) {
    first_token_seen_ = true;
    context_.metrics->observe_time_to_first_token(std::chrono::duration<double>(now - received_).count());
  }
  auto& last = last_event_[static_cast<size_t>(event.sibling)];
  if (last) context_.metrics->observe_inter_token_latency(std::chrono::duration<double>(now - *last).count());
  last = now;
}

void GenerationJob::handle(TokenEvent&& event) {
  if (event.finish) engine_finals_++;
  if (!observer_) return;  // already complete (a stop string ended every sibling)
  const auto s = static_cast<size_t>(event.sibling);
  if (s >= decoders_.size()) return;
  usage_.prompt_tokens = event.usage.prompt_tokens;
  usage_.cached_prompt_tokens = event.usage.cached_prompt_tokens;
  record_timing(event);
  SiblingDecoder& decoder = decoders_[s];
  if (decoder.done()) return;
  SiblingDelta delta;
  decoder.on_tokens(event, &delta);
  if (decoder.stopped_by_string()) {
    // The engine stops the sibling too (its KV is freed at once; a repeat is ignored); routing
    // replay waits for the engine's final event, which carries the routing.
    if (!event.finish) context_.engine->stop_sibling(event.request, event.sibling);
    if (spec_.reports_positions() && !event.finish) {
      if (!delta.empty()) observer_->on_delta(event.sibling, std::move(delta));
      return;
    }
    finish_sibling(event.sibling, spec_.reports_positions() ? &event : nullptr, std::move(delta));
  } else if (event.finish) {
    finish_sibling(event.sibling, &event, std::move(delta));
  } else if (!delta.empty()) {
    observer_->on_delta(event.sibling, std::move(delta));
  }
}

void GenerationJob::finish_sibling(int32_t sibling, const TokenEvent* engine_final, SiblingDelta&& delta) {
  SiblingResult result = decoders_[static_cast<size_t>(sibling)].finish(engine_final, &delta);
  usage_.completion_tokens += result.completion_tokens;
  if (!delta.empty()) observer_->on_delta(sibling, std::move(delta));
  observer_->on_sibling_done(sibling, std::move(result));
  if (--siblings_left_ > 0) return;
  // Every sibling is answered; siblings the engine still runs (stop strings) are not needed.
  if (engine_finals_ < static_cast<int64_t>(decoders_.size())) cancel();
  context_.metrics->observe_end_to_end(std::chrono::duration<double>(Clock::now() - received_).count());
  context_.counters->active.fetch_sub(1);
  if (context_.jobs) context_.jobs->remove(spec_.rid, this);
  observer_->on_complete(usage_);
  observer_.reset();
}

}  // namespace beam::server
