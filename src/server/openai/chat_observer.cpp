// ChatObserver (see chat_observer.h).
#include "server/openai/chat_observer.h"

#include "server/openai/choice_records.h"
#include "server/http/sse.h"
#include "server/openai/logprobs_json.h"

namespace beam::server {

std::string chat_finish_reason(const SiblingResult& result) {
  switch (result.reason) {
    case FinishReason::kStop: return result.parsed.tool_calls.empty() ? "stop" : "tool_calls";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "abort";
    case FinishReason::kError: return "error";
  }
  return "error";
}

Json openai_usage(const GenerationUsage& usage) {
  return Json{{"prompt_tokens", usage.prompt_tokens},
              {"completion_tokens", usage.completion_tokens},
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", usage.cached_prompt_tokens}}}};
}

Json choice_usage(int64_t prompt_tokens, int64_t completion_tokens) {
  return Json{{"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"total_tokens", prompt_tokens + completion_tokens}};
}

Json output_token_ids(const std::vector<OutputToken>& tokens) {
  Json ids = Json::array();
  for (const OutputToken& t : tokens) ids.push_back(t.id);
  return ids;
}

void end_openai_stream(Exchange& exchange, const std::optional<std::string>& engine_error,
                       Json usage_chunk, const GenerationUsage& usage) {
  if (engine_error) {
    exchange.send(http::sse_data(openai_error_body(
        api_error(ErrorKind::kServer, "the engine failed the request: " + *engine_error))));
  }
  if (!usage_chunk.is_null()) {
    usage_chunk["usage"] = openai_usage(usage);
    exchange.send(http::sse_data(dump_json(usage_chunk)));
  }
  exchange.send(http::sse_done());
  exchange.end_stream();
}

ChatObserver::ChatObserver(std::shared_ptr<Exchange> exchange, const text::Tokenizer* tokenizer,
                           ChatResponseOptions options)
    : exchange_(std::move(exchange)),
      tokenizer_(tokenizer),
      options_(std::move(options)),
      role_sent_(static_cast<size_t>(options_.n), false),
      streamed_tokens_(static_cast<size_t>(options_.n), 0),
      results_(static_cast<size_t>(options_.n)) {}

void ChatObserver::on_rejected(const ApiError& error) { exchange_->respond_error(error); }

Json ChatObserver::chunk(Json choices, int32_t sibling) const {
  Json c = {{"id", options_.id}, {"object", "chat.completion.chunk"}, {"created", options_.created},
            {"model", options_.model}, {"choices", std::move(choices)}};
  if (options_.output.include_usage) c["usage"] = nullptr;
  if (options_.output.continuous_usage && sibling >= 0)
    c["usage"] = choice_usage(static_cast<int64_t>(options_.prompt_ids.size()),
                              streamed_tokens_[static_cast<size_t>(sibling)]);
  return c;
}

void ChatObserver::ensure_stream() {
  if (!exchange_->stream_started()) exchange_->start_stream(std::string(http::kSseContentType));
}

void ChatObserver::send_chunk(int32_t sibling, Json delta, Json logprobs, Json finish_reason,
                              const SiblingResult* done, Json token_ids) {
  ensure_stream();
  Json choice = {{"index", sibling}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)},
                 {"finish_reason", std::move(finish_reason)}};
  if (options_.output.return_token_ids) choice["token_ids"] = std::move(token_ids);
  if (done) add_choice_records(*done, choice);
  Json c = chunk(Json::array({std::move(choice)}), sibling);
  exchange_->send(http::sse_data(dump_json(c)));
}

void ChatObserver::send_role(int32_t sibling) {
  const auto s = static_cast<size_t>(sibling);
  if (role_sent_[s]) return;
  role_sent_[s] = true;
  ensure_stream();
  Json choice = {{"index", sibling},
                 {"delta", {{"role", "assistant"}, {"content", ""}}},
                 {"logprobs", nullptr},
                 {"finish_reason", nullptr}};
  if (options_.output.return_token_ids) choice["token_ids"] = Json::array();
  Json c = chunk(Json::array({std::move(choice)}), sibling);
  if (options_.output.return_token_ids) c["prompt_token_ids"] = options_.prompt_ids;
  exchange_->send(http::sse_data(dump_json(c)));
}

void ChatObserver::on_delta(int32_t sibling, SiblingDelta&& delta) {
  const auto s = static_cast<size_t>(sibling);
  if (!options_.stream) return;  // the whole message is built from the sibling result
  send_role(sibling);
  streamed_tokens_[s] += static_cast<int64_t>(delta.tokens.size());
  // The delta's tokens (their logprobs and ids) ride on its last part's chunk, or on a chunk of
  // their own when the parser released no text for them yet.
  Json logprobs = nullptr;
  if (options_.logprobs && !delta.tokens.empty()) {
    logprobs = Json{{"content", logprob_entries({tokenizer_, options_.tokens_as_ids}, delta.tokens,
                                                options_.top_logprobs)},
                    {"refusal", nullptr}};
  }
  Json ids = output_token_ids(delta.tokens);
  for (size_t i = 0; i < delta.parts.size(); ++i) {
    const ResponseDelta& p = delta.parts[i];
    Json d = Json::object();
    switch (p.kind) {
      case ResponseDelta::Kind::kReasoning:
        d["reasoning_content"] = p.text;
        break;
      case ResponseDelta::Kind::kContent:
        d["content"] = p.text;
        break;
      case ResponseDelta::Kind::kToolCallStart:
        d["tool_calls"] = Json::array({Json{{"index", p.tool_index}, {"id", p.tool_call_id}, {"type", "function"},
                                            {"function", {{"name", p.tool_name}, {"arguments", ""}}}}});
        break;
      case ResponseDelta::Kind::kToolCallArguments:
        d["tool_calls"] = Json::array({Json{{"index", p.tool_index}, {"function", {{"arguments", p.text}}}}});
        break;
    }
    if (i + 1 < delta.parts.size()) {
      send_chunk(sibling, std::move(d), nullptr, nullptr);
    } else {
      send_chunk(sibling, std::move(d), std::move(logprobs), nullptr, nullptr, std::move(ids));
      return;
    }
  }
  const bool ids_pending = options_.output.return_token_ids && !delta.tokens.empty();
  if (!logprobs.is_null() || ids_pending)
    send_chunk(sibling, Json::object(), std::move(logprobs), nullptr, nullptr, std::move(ids));
}

void ChatObserver::on_sibling_done(int32_t sibling, SiblingResult&& result) {
  const auto s = static_cast<size_t>(sibling);
  if (result.reason == FinishReason::kError) error_ = result.error;
  if (options_.stream && !(result.reason == FinishReason::kError && !exchange_->stream_started())) {
    send_role(sibling);
    send_chunk(sibling, Json::object(), nullptr, chat_finish_reason(result), &result);
  }
  results_[s] = std::move(result);
}

Json ChatObserver::message(const SiblingResult& result) const {
  const ParsedResponse& p = result.parsed;
  Json m = {{"role", "assistant"}};
  m["content"] = p.content.empty() && !p.tool_calls.empty() ? Json(nullptr) : Json(p.content);
  if (!p.reasoning.empty()) m["reasoning_content"] = p.reasoning;
  if (!p.tool_calls.empty()) {
    Json calls = Json::array();
    for (const ParsedToolCall& c : p.tool_calls) {
      calls.push_back(Json{{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

void ChatObserver::on_complete(const GenerationUsage& usage) {
  exchange_->note("completion_tokens", std::to_string(usage.completion_tokens));
  exchange_->note("cached_tokens", std::to_string(usage.cached_prompt_tokens));
  exchange_->note("finish", results_.empty() ? "" : chat_finish_reason(results_[0]));
  if (error_ && !exchange_->stream_started()) {
    exchange_->respond_error(api_error(ErrorKind::kServer, "the engine failed the request: " + *error_));
    return;
  }
  if (options_.stream) {
    end_openai_stream(*exchange_, error_,
                      options_.output.include_usage ? chunk(Json::array()) : Json(nullptr), usage);
    return;
  }
  Json choices = Json::array();
  for (size_t i = 0; i < results_.size(); ++i) {
    const SiblingResult& r = results_[i];
    Json logprobs = nullptr;
    if (options_.logprobs) {
      logprobs = Json{{"content", logprob_entries({tokenizer_, options_.tokens_as_ids}, r.tokens,
                                                  options_.top_logprobs)},
                      {"refusal", nullptr}};
    }
    choices.push_back(Json{{"index", i}, {"message", message(r)}, {"logprobs", std::move(logprobs)},
                           {"finish_reason", chat_finish_reason(r)}});
    if (options_.output.return_token_ids) choices.back()["token_ids"] = output_token_ids(r.tokens);
    add_choice_records(r, choices.back());
  }
  Json body = {{"id", options_.id}, {"object", "chat.completion"}, {"created", options_.created},
               {"model", options_.model}, {"choices", std::move(choices)}, {"usage", openai_usage(usage)}};
  if (options_.output.return_token_ids) body["prompt_token_ids"] = options_.prompt_ids;
  if (options_.prompt_logprobs) {
    // Every choice scored the same prompt; take the first that reports it.
    const std::vector<TokenLogprobs>* entries = &results_[0].prompt_logprobs;
    for (const SiblingResult& r : results_) {
      if (!r.prompt_logprobs.empty()) {
        entries = &r.prompt_logprobs;
        break;
      }
    }
    body["prompt_logprobs"] = vllm_prompt_logprobs(tokenizer_, options_.prompt_ids, 1, *entries,
                                                   *options_.prompt_logprobs);
  }
  exchange_->respond_json(200, dump_json(body));
}

}  // namespace beam::server
