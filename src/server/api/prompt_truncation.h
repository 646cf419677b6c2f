// vLLM's truncate_prompt_tokens (chat and legacy completions): only the last k tokens of the
// tokenized prompt are kept (left truncation), before the prompt-fits check, the prefix cache
// lookup and prompt logprobs, so usage.prompt_tokens counts the kept tokens.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/api/json_fields.h"
#include "server/api/served_model.h"

namespace beam::server {

// truncate_prompt_tokens: an integer >= 1, or -1 (the model's context); 0, values below -1 and
// non-integers fail the field.
void read_truncate_prompt_tokens(FieldReader& r, std::optional<int64_t>* out);

// Keeps the last k of `ids` (k = -1: the model's context; absent: all). When tokens are dropped,
// *text becomes the kept ids detokenized by the model's tokenizer (special tokens included): what
// echo returns and output parsing starts from. A k past the model's context is a 400 naming the
// field, as in vLLM. Returns whether tokens were dropped.
ApiExpected<bool> truncate_prompt(const ServedModel& model, const std::optional<int64_t>& k,
                                  std::vector<int32_t>* ids, std::string* text);

}  // namespace beam::server
