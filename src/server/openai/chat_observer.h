// ChatObserver: engine output → a chat.completion object, or chat.completion.chunk SSE events
// (role first, reasoning_content / content / tool_call deltas, a finish chunk per choice, the
// usage chunk with empty choices when stream_options.include_usage, then [DONE]). With vLLM's
// return_token_ids the response has prompt_token_ids (streamed: on each choice's first chunk) and
// each choice its token_ids (streamed: every chunk its own, a chunk of its own when the output
// parser holds their text back, so the chunks' ids always add up to the choice's).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/api/exchange.h"
#include "server/generation/generation_job.h"
#include "server/openai/output_fields.h"
#include "text/tokenizer.h"

namespace beam::server {

struct ChatResponseOptions {
  std::string id;
  std::string model;
  int64_t created = 0;
  bool stream = false;
  OutputFields output;  // include_usage, continuous usage, return_token_ids
  bool logprobs = false;
  int64_t top_logprobs = 0;
  bool tokens_as_ids = false;  // vLLM's return_tokens_as_token_ids: logprobs say "token_id:<id>"
  int64_t n = 1;
  // vLLM's prompt_logprobs (non-streaming): alternatives per position of `prompt_ids`.
  std::optional<int64_t> prompt_logprobs;
  std::vector<int32_t> prompt_ids;  // the rendered prompt's
};

class ChatObserver : public GenerationObserver {
 public:
  ChatObserver(std::shared_ptr<Exchange> exchange, const text::Tokenizer* tokenizer, ChatResponseOptions options);

  void on_rejected(const ApiError& error) override;
  void on_delta(int32_t sibling, SiblingDelta&& delta) override;
  void on_sibling_done(int32_t sibling, SiblingResult&& result) override;
  void on_complete(const GenerationUsage& usage) override;

 private:
  // A chunk of `choices`; with continuous usage, `sibling`'s usage so far.
  Json chunk(Json choices, int32_t sibling = -1) const;
  // done: the choice's result, on its last chunk (add_choice_records); token_ids: the chunk's
  // output tokens (return_token_ids).
  void send_chunk(int32_t sibling, Json delta, Json logprobs, Json finish_reason,
                  const SiblingResult* done = nullptr, Json token_ids = Json::array());
  void ensure_stream();
  // The choice's first chunk (role "assistant"; the prompt's ids with return_token_ids), once.
  void send_role(int32_t sibling);
  Json message(const SiblingResult& result) const;

  std::shared_ptr<Exchange> exchange_;
  const text::Tokenizer* tokenizer_;
  ChatResponseOptions options_;
  std::vector<bool> role_sent_;
  std::vector<int64_t> streamed_tokens_;  // per choice: output tokens streamed so far
  std::vector<SiblingResult> results_;
  std::optional<std::string> error_;  // the engine failed a choice
};

// "stop" / "length" / "tool_calls" (a stop with tool calls) / "abort" / "error".
std::string chat_finish_reason(const SiblingResult& result);
// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"}}.
Json openai_usage(const GenerationUsage& usage);
// vLLM's continuous usage of one choice: {"prompt_tokens", "completion_tokens", "total_tokens"}.
Json choice_usage(int64_t prompt_tokens, int64_t completion_tokens);
// The ids of `tokens` as a JSON array (return_token_ids).
Json output_token_ids(const std::vector<OutputToken>& tokens);
// Ends an OpenAI SSE stream (chat and legacy completions): an error event when the engine failed a
// choice after the stream started (`engine_error`; the SDKs raise it), then `usage_chunk` (a chunk
// with no choices; null when the client did not ask for usage) carrying openai_usage(usage), then
// [DONE].
void end_openai_stream(Exchange& exchange, const std::optional<std::string>& engine_error,
                       Json usage_chunk, const GenerationUsage& usage);

}  // namespace beam::server
