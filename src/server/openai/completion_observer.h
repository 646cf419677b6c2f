// CompletionObserver: engine output → a text_completion object, or text_completion SSE chunks (a
// finish chunk per choice, the usage chunk with stream_options.include_usage, then [DONE]). Choice
// c answers prompt c / n. Echo puts the prompt's text (and, with logprobs, its tokens) first in
// the choice; the first chunk of a streamed choice carries it, and vLLM's prompt_logprobs. With
// vLLM's return_token_ids each choice has prompt_token_ids (streamed: on its first chunk) and
// token_ids (streamed: each chunk's own).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/api/exchange.h"
#include "server/generation/generation_job.h"
#include "server/openai/logprobs_json.h"
#include "server/openai/output_fields.h"
#include "text/tokenizer.h"

namespace beam::server {

// What the response echoes of one prompt.
struct EchoedPrompt {
  std::vector<int32_t> ids;
  std::string text;  // the prompt as sent, or the detokenized ids
};

struct CompletionResponseOptions {
  std::string id;
  std::string model;
  int64_t created = 0;
  bool stream = false;
  OutputFields output;  // include_usage, continuous usage, return_token_ids
  std::optional<int64_t> logprobs;  // legacy logprobs=k: k alternatives per token
  bool tokens_as_ids = false;  // vLLM's return_tokens_as_token_ids: logprobs say "token_id:<id>"
  bool echo = false;
  std::optional<int64_t> prompt_logprobs;  // vLLM's: alternatives per prompt position
  int64_t n = 1;                           // choices per prompt
  std::vector<EchoedPrompt> prompts;
};

class CompletionObserver : public GenerationObserver {
 public:
  CompletionObserver(std::shared_ptr<Exchange> exchange, const text::Tokenizer* tokenizer,
                     CompletionResponseOptions options);

  void on_rejected(const ApiError& error) override;
  void on_delta(int32_t sibling, SiblingDelta&& delta) override;
  void on_sibling_done(int32_t sibling, SiblingResult&& result) override;
  void on_complete(const GenerationUsage& usage) override;

 private:
  const EchoedPrompt& prompt_of(size_t choice) const;
  // The choice's text, legacy logprobs and vLLM prompt_logprobs from `prompt_logprobs` and
  // `tokens`; with `first` (a whole choice, or a stream's first chunk) the echo leads.
  void fill_choice(Json& choice, size_t c, bool first, std::string text,
                   const std::vector<TokenLogprobs>& prompt_logprobs,
                   const std::vector<OutputToken>& tokens, CompletionLogprobs& builder) const;
  // Streams one chunk of choice `c` (finish null: output; else its last chunk, which carries
  // `done`'s records: add_choice_records).
  void send(int32_t c, std::string text, const std::vector<TokenLogprobs>& prompt_logprobs,
            const std::vector<OutputToken>& tokens, Json finish,
            const SiblingResult* done = nullptr);
  // A chunk of `choices`; with continuous usage, choice `c`'s usage so far.
  Json chunk(Json choices, int32_t c = -1) const;

  std::shared_ptr<Exchange> exchange_;
  const text::Tokenizer* tokenizer_;
  CompletionResponseOptions options_;
  std::vector<SiblingResult> results_;
  std::vector<CompletionLogprobs> builders_;  // streaming: one per choice
  std::vector<bool> started_;                 // streaming: the choice's first chunk went out
  std::vector<int64_t> streamed_tokens_;      // streaming: the choice's output tokens so far
  std::optional<std::string> error_;
};

// "stop" / "length" / "abort" / "error" (a stop with tool-call text is still "stop").
std::string completion_finish_reason(const SiblingResult& result);

}  // namespace beam::server
