// CompletionObserver (see completion_observer.h).
#include "server/openai/completion_observer.h"

#include "server/openai/choice_records.h"
#include "server/http/sse.h"
#include "server/openai/chat_observer.h"

namespace beam::server {

std::string completion_finish_reason(const SiblingResult& result) {
  std::string s = chat_finish_reason(result);
  return s == "tool_calls" ? "stop" : s;
}

CompletionObserver::CompletionObserver(std::shared_ptr<Exchange> exchange,
                                       const text::Tokenizer* tokenizer,
                                       CompletionResponseOptions options)
    : exchange_(std::move(exchange)), tokenizer_(tokenizer), options_(std::move(options)) {
  const size_t choices = options_.prompts.size() * static_cast<size_t>(options_.n);
  results_.resize(choices);
  started_.assign(choices, false);
  streamed_tokens_.assign(choices, 0);
  for (size_t i = 0; i < choices; ++i)
    builders_.emplace_back(LogprobTokenNames{tokenizer_, options_.tokens_as_ids},
                           options_.logprobs.value_or(0));
}

const EchoedPrompt& CompletionObserver::prompt_of(size_t choice) const {
  return options_.prompts[choice / static_cast<size_t>(options_.n)];
}

void CompletionObserver::on_rejected(const ApiError& error) {
  exchange_->respond_error(error);
}

void CompletionObserver::fill_choice(Json& choice, size_t c, bool first, std::string text,
                                     const std::vector<TokenLogprobs>& prompt_logprobs,
                                     const std::vector<OutputToken>& tokens,
                                     CompletionLogprobs& builder) const {
  const EchoedPrompt& prompt = prompt_of(c);
  const bool echo = first && options_.echo;
  choice["text"] = echo ? prompt.text + text : std::move(text);
  if (options_.logprobs) {
    // Engine prompt logprobs start at position 1 whenever echo asks for logprobs.
    if (echo) builder.add_prompt(prompt.ids, 1, prompt_logprobs);
    builder.add(tokens);
    choice["logprobs"] = builder.take();
  } else {
    choice["logprobs"] = nullptr;
  }
  if (first && options_.prompt_logprobs) {
    choice["prompt_logprobs"] =
        vllm_prompt_logprobs(tokenizer_, prompt.ids, 1, prompt_logprobs, *options_.prompt_logprobs);
  }
  if (options_.output.return_token_ids) {
    if (first) choice["prompt_token_ids"] = prompt.ids;
    choice["token_ids"] = output_token_ids(tokens);
  }
}

void CompletionObserver::on_delta(int32_t sibling, SiblingDelta&& delta) {
  if (!options_.stream) return;
  std::string text;
  for (const ResponseDelta& p : delta.parts) text += p.text;
  send(sibling, std::move(text), delta.prompt_logprobs, delta.tokens, nullptr);
}

void CompletionObserver::on_sibling_done(int32_t sibling, SiblingResult&& result) {
  if (result.reason == FinishReason::kError) error_ = result.error;
  // An engine failure before any output becomes an error response instead of a stream.
  if (options_.stream && (exchange_->stream_started() || result.reason != FinishReason::kError)) {
    send(sibling, "", result.prompt_logprobs, {}, completion_finish_reason(result), &result);
  }
  results_[static_cast<size_t>(sibling)] = std::move(result);
}

Json CompletionObserver::chunk(Json choices, int32_t c) const {
  Json out = {{"id", options_.id},
              {"object", "text_completion"},
              {"created", options_.created},
              {"model", options_.model},
              {"choices", std::move(choices)}};
  if (options_.stream && options_.output.include_usage) out["usage"] = nullptr;
  if (options_.stream && options_.output.continuous_usage && c >= 0) {
    const auto s = static_cast<size_t>(c);
    out["usage"] = choice_usage(static_cast<int64_t>(prompt_of(s).ids.size()), streamed_tokens_[s]);
  }
  return out;
}

void CompletionObserver::send(int32_t c, std::string text,
                              const std::vector<TokenLogprobs>& prompt_logprobs,
                              const std::vector<OutputToken>& tokens, Json finish,
                              const SiblingResult* done) {
  if (!exchange_->stream_started()) exchange_->start_stream(std::string(http::kSseContentType));
  const auto s = static_cast<size_t>(c);
  const bool first = !started_[s];
  started_[s] = true;
  streamed_tokens_[s] += static_cast<int64_t>(tokens.size());
  Json choice = {{"index", c}};
  if (first || finish.is_null()) {
    fill_choice(choice, s, first, std::move(text), prompt_logprobs, tokens, builders_[s]);
  } else {
    choice["text"] = std::move(text);
    choice["logprobs"] = nullptr;
    if (options_.output.return_token_ids) choice["token_ids"] = Json::array();
  }
  choice["finish_reason"] = std::move(finish);
  if (done) add_choice_records(*done, choice);
  exchange_->send(http::sse_data(dump_json(chunk(Json::array({std::move(choice)}), c))));
}

void CompletionObserver::on_complete(const GenerationUsage& usage) {
  exchange_->note("completion_tokens", std::to_string(usage.completion_tokens));
  if (error_ && !exchange_->stream_started()) {
    exchange_->respond_error(
        api_error(ErrorKind::kServer, "the engine failed the request: " + *error_));
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
    Json choice = {{"index", i}};
    CompletionLogprobs builder({tokenizer_, options_.tokens_as_ids}, options_.logprobs.value_or(0));
    fill_choice(choice, i, /*first=*/true, r.parsed.content, r.prompt_logprobs, r.tokens, builder);
    choice["finish_reason"] = completion_finish_reason(r);
    add_choice_records(r, choice);
    choices.push_back(std::move(choice));
  }
  Json body = chunk(std::move(choices));
  body["usage"] = openai_usage(usage);
  exchange_->respond_json(200, dump_json(body));
}

}  // namespace beam::server
