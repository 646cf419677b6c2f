// Logprobs in the three OpenAI shapes: chat ({"content": [{token, logprob, bytes, top_logprobs}]}),
// Responses (the same entries on output_text) and legacy completions ({tokens, token_logprobs,
// top_logprobs, text_offset}, the prompt's first when echoed); vLLM's prompt_logprobs; and the
// native /generate entries. A -inf logprob is written as -9999.0, as OpenAI does. Chat and legacy
// entries name tokens by their bytes, or as "token_id:<id>" (vLLM's return_tokens_as_token_ids).
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

// How chat and legacy logprobs name a token: the bytes it decodes to, or with `as_ids` vLLM's
// "token_id:<id>" (return_tokens_as_token_ids).
struct LogprobTokenNames {
  const text::Tokenizer* tokenizer = nullptr;
  bool as_ids = false;
  std::string operator()(int32_t id) const;
};

// [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}], top lists cut to `num_top`;
// `bytes` are those of `token`.
Json logprob_entries(const LogprobTokenNames& names, const std::vector<OutputToken>& tokens,
                     int64_t num_top);

// Legacy completions logprobs, built incrementally (text_offset counts bytes of token text from
// the start of the choice's text, the echoed prompt included, whatever `names` writes).
class CompletionLogprobs {
 public:
  // `num_top`: alternatives per token (top_logprobs entries are null when 0).
  CompletionLogprobs(LogprobTokenNames names, int64_t num_top);
  // Appends the prompt's tokens (echo): positions before `start` (position 0 always) have null
  // token_logprobs and top_logprobs; position p >= start has entries[p - start].
  void add_prompt(const std::vector<int32_t>& prompt, int64_t start,
                  const std::vector<TokenLogprobs>& entries);
  // Appends the output tokens that carry logprobs.
  void add(const std::vector<OutputToken>& tokens);
  // The logprobs object of what was appended since the last take (a chunk's, or a whole choice's).
  Json take();

 private:
  void append(int32_t id, const TokenLogprobs* logprobs);

  LogprobTokenNames names_;
  int64_t num_top_;
  size_t offset_ = 0;
  Json part_;
};

// The engine's prompt logprobs entry of prompt position p (entries[p - start]), or null where it
// has none: before `start`, past the entries, and at position 0 always.
const TokenLogprobs* prompt_entry(const std::vector<TokenLogprobs>& entries, int64_t start,
                                  int64_t p);

// vLLM's prompt_logprobs: one entry per prompt position, null before `start` (position 0
// always), else {"<token id>": {"logprob", "rank", "decoded_token"}} holding the prompt token,
// then its `num_top` top alternatives best first (a token that is both appears once).
// entries[p - start] belongs to position p.
Json vllm_prompt_logprobs(const text::Tokenizer* tokenizer, const std::vector<int32_t>& prompt,
                          int64_t start, const std::vector<TokenLogprobs>& entries,
                          int64_t num_top);

// /generate's logprobs entry: {token_id, logprob, rank, top_logprobs: [{token_id, logprob}]}, the
// top list cut to `num_top`.
Json native_logprob_entry(const TokenLogprobs& logprobs, int64_t num_top);
// /generate's entropies (native `entropy`, SGLang's meta_info output_token_entropy): each token's
// OutputToken::entropy, in order (tokens without one are left out).
Json token_entropies(const std::vector<OutputToken>& tokens);
// /generate's prompt_logprobs: positions [first, prompt_tokens), null before `start` (position 0
// always), else native_logprob_entry(entries[p - start]).
Json native_prompt_logprobs(int64_t prompt_tokens, int64_t first, int64_t start,
                            const std::vector<TokenLogprobs>& entries, int64_t num_top);

}  // namespace beam::server
