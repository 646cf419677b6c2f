// SGLang /generate responses (see sglang_generate_observer.h).
#include "server/native/sglang_generate_observer.h"

#include <algorithm>
#include <chrono>

#include "server/api/hidden_states.h"
#include "server/api/routed_experts.h"
#include "server/http/sse.h"
#include "server/openai/logprobs_json.h"

namespace beam::server {
namespace {

Json top_triples(const TokenLogprobs& lp, int64_t num_top, const text::Tokenizer* text) {
  Json out = Json::array();
  for (size_t i = 0; i < lp.top.size() && static_cast<int64_t>(i) < num_top; ++i)
    out.push_back(sglang_logprob_triple(lp.top[i].logprob, lp.top[i].token, text));
  return out;
}

}  // namespace

Json sglang_logprob_triple(std::optional<float> logprob, int32_t id, const text::Tokenizer* text) {
  return Json::array({logprob ? Json(json_logprob(*logprob)) : Json(nullptr), id,
                      text ? Json(token_bytes(text, id)) : Json(nullptr)});
}

Json sglang_output_token_logprobs(const std::vector<OutputToken>& tokens,
                                  const text::Tokenizer* text) {
  Json out = Json::array();
  for (const OutputToken& t : tokens) {
    if (t.logprobs) out.push_back(sglang_logprob_triple(t.logprobs->chosen.logprob, t.id, text));
  }
  return out;
}

Json sglang_output_top_logprobs(const std::vector<OutputToken>& tokens, int64_t num_top,
                                const text::Tokenizer* text) {
  Json out = Json::array();
  for (const OutputToken& t : tokens) {
    if (t.logprobs) out.push_back(top_triples(*t.logprobs, num_top, text));
  }
  return out;
}

Json sglang_input_token_logprobs(const std::vector<int32_t>& prompt, int64_t start,
                                 const std::vector<TokenLogprobs>& entries,
                                 const text::Tokenizer* text) {
  Json out = Json::array();
  for (auto p = start; p < static_cast<int64_t>(prompt.size()); ++p) {
    const TokenLogprobs* e = prompt_entry(entries, start + 1, p);  // position `start`: null
    out.push_back(sglang_logprob_triple(e ? std::optional<float>(e->chosen.logprob) : std::nullopt,
                                        prompt[static_cast<size_t>(p)], text));
  }
  return out;
}

Json sglang_input_top_logprobs(const std::vector<int32_t>& prompt, int64_t start,
                               const std::vector<TokenLogprobs>& entries, int64_t num_top,
                               const text::Tokenizer* text) {
  Json out = Json::array();
  for (auto p = start; p < static_cast<int64_t>(prompt.size()); ++p) {
    const TokenLogprobs* e = prompt_entry(entries, start + 1, p);  // position `start`: null
    out.push_back(e ? top_triples(*e, num_top, text) : Json(nullptr));
  }
  return out;
}

Json sglang_finish_reason(const SiblingResult& r, const std::vector<std::string>& stops,
                          const std::vector<StopRegex>& regexes) {
  switch (r.reason) {
    case FinishReason::kLength:
      return Json{{"type", "length"}, {"length", r.completion_tokens}};
    case FinishReason::kStop: {
      Json matched = nullptr;
      if (r.stop_string && *r.stop_string < stops.size())
        matched = stops[*r.stop_string];
      else if (r.stop_string && *r.stop_string - stops.size() < regexes.size())
        matched = regexes[*r.stop_string - stops.size()].pattern;
      else if (r.stop_token)
        matched = *r.stop_token;
      return Json{{"type", "stop"}, {"matched", matched}};
    }
    case FinishReason::kCancelled:
      return Json{{"type", "abort"}, {"message", "the request was cancelled"}};
    case FinishReason::kError:
      return Json{{"type", "abort"}, {"message", r.error}};
  }
  return nullptr;
}

SglangTimings sglang_timings(std::chrono::steady_clock::time_point received,
                             std::chrono::steady_clock::time_point finished,
                             const SequenceTimes& engine, int64_t completion_tokens,
                             std::chrono::system_clock::time_point now_unix,
                             std::chrono::steady_clock::time_point now) {
  using std::chrono::duration;
  using Steady = std::chrono::steady_clock::time_point;
  const auto seconds = [](auto d) { return duration<double>(d).count(); };
  const auto unix_of = [&](Steady t) { return seconds((now_unix - (now - t)).time_since_epoch()); };
  const auto known = [](Steady t) { return t != Steady{}; };
  SglangTimings out;
  out.e2e_latency = seconds(finished - received);
  out.request_received_ts = unix_of(received);
  out.request_finished_ts = unix_of(finished);
  if (known(engine.scheduled)) {
    if (known(engine.queued)) out.queue_time = seconds(engine.scheduled - engine.queued);
    out.forward_entry_time = unix_of(engine.scheduled);
    out.inference_time = seconds(finished - engine.scheduled);
    if (known(engine.prefilled))
      out.prefill_launch_latency = seconds(engine.prefilled - engine.scheduled);
  }
  if (known(engine.prefilled)) {
    out.prefill_finished_time = unix_of(engine.prefilled);
    const double decoding = seconds(finished - engine.prefilled);
    if (decoding > 0 && completion_tokens > 0)
      out.decode_throughput = static_cast<double>(completion_tokens) / decoding;
  }
  return out;
}

Json sglang_output_json(const SglangSample& s, const SglangItem& item,
                        const SglangOutputOptions& o) {
  const std::vector<OutputToken>& tokens = s.result ? s.result->tokens : s.tokens;
  Json out = Json::object();
  if (o.index) out["index"] = *o.index;
  if (o.with_text) out["text"] = s.result ? s.result->parsed.content : s.text;
  Json ids = Json::array();
  for (const OutputToken& t : tokens) ids.push_back(t.id);
  out["output_ids"] = std::move(ids);
  Json m = Json::object();
  m["id"] = s.id;
  m["finish_reason"] = s.result ? sglang_finish_reason(*s.result, item.sampling.stop_strings,
                                                       item.sampling.stop_regexes)
                                : Json(nullptr);
  m["prompt_tokens"] = item.prompt_ids.size();
  m["weight_version"] = o.weight_version;
  m["total_retractions"] = s.result ? s.result->retractions : s.retractions;
  if (item.return_logprob) {
    const std::vector<TokenLogprobs>& prompt_lp = s.result && !s.result->prompt_logprobs.empty()
                                                      ? s.result->prompt_logprobs
                                                      : s.prompt_logprobs;
    m["input_token_logprobs"] =
        sglang_input_token_logprobs(item.prompt_ids, item.logprob_start, prompt_lp, o.logprob_text);
    m["output_token_logprobs"] = sglang_output_token_logprobs(tokens, o.logprob_text);
    if (!item.token_ids_logprob.empty()) {
      Json per_position = Json::array();  // position logprob_start: null, as SGLang pads it
      for (auto p = item.logprob_start; p < static_cast<int64_t>(item.prompt_ids.size()); ++p) {
        const TokenLogprobs* e = prompt_entry(prompt_lp, item.logprob_start + 1, p);
        Json triples = Json::array();
        if (e)
          for (const TokenLogprob& id : e->token_ids)
            triples.push_back(sglang_logprob_triple(id.logprob, id.token, o.logprob_text));
        per_position.push_back(e ? std::move(triples) : Json(nullptr));
      }
      m["input_token_ids_logprobs"] = std::move(per_position);
      Json per_token = Json::array();
      for (const OutputToken& t : tokens) {
        Json triples = Json::array();
        for (const TokenLogprob& e : t.token_ids_logprobs)
          triples.push_back(sglang_logprob_triple(e.logprob, e.token, o.logprob_text));
        per_token.push_back(std::move(triples));
      }
      m["output_token_ids_logprobs"] = std::move(per_token);
    }
    if (item.top_logprobs_num > 0) {
      m["input_top_logprobs"] = sglang_input_top_logprobs(
          item.prompt_ids, item.logprob_start, prompt_lp, item.top_logprobs_num, o.logprob_text);
      m["output_top_logprobs"] =
          sglang_output_top_logprobs(tokens, item.top_logprobs_num, o.logprob_text);
    }
  }
  if (item.return_entropy) m["output_token_entropy"] = token_entropies(tokens);
  m["completion_tokens"] = tokens.size();
  m["cached_tokens"] = s.cached_tokens;
  m["spec_verify_ct"] = s.result ? s.result->spec_verifications : 0;
  if (s.result && s.result->routed_experts)
    m["routed_experts"] = encode_routed_experts(*s.result->routed_experts);
  if (s.result && s.result->hidden_states)
    m["hidden_states"] = sglang_hidden_states(*s.result->hidden_states,
                                              static_cast<int64_t>(item.prompt_ids.size()));
  if (const std::optional<SglangTimings>& t = s.timings) {
    m["e2e_latency"] = t->e2e_latency;
    m["request_received_ts"] = t->request_received_ts;
    m["request_finished_ts"] = t->request_finished_ts;
    const auto put = [&m](const char* key, const std::optional<double>& v) {
      if (v) m[key] = *v;
    };
    put("queue_time", t->queue_time);
    put("forward_entry_time", t->forward_entry_time);
    put("prefill_launch_latency", t->prefill_launch_latency);
    put("prefill_finished_time", t->prefill_finished_time);
    put("inference_time", t->inference_time);
    put("decode_throughput", t->decode_throughput);
  }
  out["meta_info"] = std::move(m);
  return out;
}

SglangGenerateObserver::SglangGenerateObserver(std::shared_ptr<Exchange> exchange,
                                               SglangGenerateRequest request,
                                               std::vector<std::string> ids,
                                               const text::Tokenizer* tokenizer,
                                               std::shared_ptr<const ServedWeights> weights)
    : exchange_(std::move(exchange)),
      request_(std::move(request)),
      tokenizer_(tokenizer),
      weights_(std::move(weights)),
      samples_(ids.size()),
      job_done_(request_.items.size(), false) {
  for (size_t i = 0; i < ids.size(); ++i) samples_[i].id = std::move(ids[i]);
}

void SglangGenerateObserver::on_rejected(const ApiError& error) {
  exchange_->respond_error(error);
}

Json SglangGenerateObserver::output(size_t sample) const {
  SglangOutputOptions o;
  o.with_text = tokenizer_ != nullptr;
  o.logprob_text = request_.return_text_in_logprobs ? tokenizer_ : nullptr;
  if (request_.batch && request_.stream) o.index = static_cast<int64_t>(sample);
  if (weights_) o.weight_version = weights_->get().version;
  const auto item = sample / static_cast<size_t>(request_.n);
  return sglang_output_json(samples_[sample], request_.items[item], o);
}

void SglangGenerateObserver::on_delta(int32_t sibling, SiblingDelta&& delta) {
  SglangSample& s = samples_[static_cast<size_t>(sibling)];
  for (const ResponseDelta& p : delta.parts) s.text += p.text;
  for (OutputToken& t : delta.tokens) s.tokens.push_back(std::move(t));
  if (!delta.prompt_logprobs.empty()) s.prompt_logprobs = std::move(delta.prompt_logprobs);
  s.retractions = std::max(s.retractions, delta.retractions);
  // Each event carries the whole output so far (SGLang's default, not incremental).
  if (request_.stream && (!delta.tokens.empty() || !delta.parts.empty()))
    send(output(static_cast<size_t>(sibling)));
}

void SglangGenerateObserver::on_sibling_done(int32_t sibling, SiblingResult&& result) {
  if (result.reason == FinishReason::kError) error_ = result.error;
  SglangSample& s = samples_[static_cast<size_t>(sibling)];
  const auto now = std::chrono::steady_clock::now();
  s.timings = sglang_timings(exchange_->received(), now, result.times, result.completion_tokens,
                             std::chrono::system_clock::now(), now);
  s.result = std::move(result);
}

// A job's usage gives its samples' cached tokens; a stream sends their final events then.
void SglangGenerateObserver::on_job_usage(int32_t first_sibling, const GenerationUsage& usage) {
  const auto n = static_cast<size_t>(request_.n);
  const size_t item = static_cast<size_t>(first_sibling) / n;
  if (item >= job_done_.size() || job_done_[item]) return;
  job_done_[item] = true;
  for (size_t k = item * n; k < (item + 1) * n; ++k) {
    samples_[k].cached_tokens = usage.cached_prompt_tokens;
    if (request_.stream && samples_[k].result &&
        (exchange_->stream_started() || samples_[k].result->reason != FinishReason::kError))
      send(output(k));
  }
}

void SglangGenerateObserver::on_complete(const GenerationUsage& usage) {
  if (request_.items.size() == 1) on_job_usage(0, usage);
  exchange_->note("completion_tokens", std::to_string(usage.completion_tokens));
  if (error_ && !exchange_->stream_started()) {
    return exchange_->respond_error(
        api_error(ErrorKind::kServer, "the engine failed the request: " + *error_));
  }
  if (request_.stream) {
    if (error_) send(Json{{"error", {{"message", "the engine failed the request: " + *error_}}}});
    exchange_->send(http::sse_done());
    return exchange_->end_stream();
  }
  Json body;
  if (request_.batch) {
    body = Json::array();
    for (size_t k = 0; k < samples_.size(); ++k) body.push_back(output(k));
  } else {
    body = output(0);
  }
  exchange_->respond_json(200, dump_json(body));
}

void SglangGenerateObserver::send(const Json& event) {
  if (!exchange_->stream_started()) exchange_->start_stream(std::string(http::kSseContentType));
  exchange_->send(http::sse_data(dump_json(event)));
}

}  // namespace beam::server
