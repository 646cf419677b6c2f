// vLLM's bad_words as token sequences (SamplingParams::bad_words_token_ids), tokenized as vLLM
// does: each word without its leading whitespace, and also after one space when the tokenizer
// writes that with as many tokens but a different first one (a word inside text, not at its
// start).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "server/api/api_error.h"
#include "text/tokenizer.h"

namespace beam::server {

// The words' token sequences (one or two per word); a word that is only whitespace, or that
// the tokenizer cannot encode, is a 400 naming `bad_words`.
ApiExpected<std::vector<std::vector<int32_t>>> bad_words_token_ids(
    const text::Tokenizer& tokenizer, std::span<const std::string> words);

}  // namespace beam::server
