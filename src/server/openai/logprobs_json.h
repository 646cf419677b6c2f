// Logprobs in the three OpenAI shapes: chat ({"content": [{token, logprob, bytes, top_logprobs}]}),
// Responses (the same entries on output_text) and legacy completions ({tokens, token_logprobs,
// top_logprobs, text_offset}). A -inf logprob is written as -9999.0, as OpenAI does.
#pragma once

#include <string>
#include <vector>

#include "server/api/json_fields.h"
#include "server/generation/sibling_decoder.h"
#include "text/tokenizer.h"

namespace beam::server {

// The raw bytes a token decodes to ("" for an id the tokenizer lacks or a null tokenizer).
std::string token_bytes(const text::Tokenizer* tokenizer, int32_t id);
double json_logprob(float logprob);

// [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}], top lists cut to `num_top`.
Json logprob_entries(const text::Tokenizer* tokenizer, const std::vector<OutputToken>& tokens, int64_t num_top);

// Legacy completions logprobs, built incrementally (text_offset counts bytes of token text).
class CompletionLogprobs {
 public:
  CompletionLogprobs(const text::Tokenizer* tokenizer, int64_t num_top, size_t text_offset_start = 0);
  // The logprobs object for these tokens (appended to the running total too).
  Json add(const std::vector<OutputToken>& tokens);
  const Json& total() const { return total_; }

 private:
  const text::Tokenizer* tokenizer_;
  int64_t num_top_;
  size_t offset_;
  Json total_;
};

}  // namespace beam::server
