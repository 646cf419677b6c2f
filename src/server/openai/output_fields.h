// Response-shape fields chat and legacy completions share: OpenAI's stream_options
// (include_usage; vLLM's continuous_usage_stats) and vLLM's return_token_ids (the prompt's and
// each choice's token ids beside the text, as RL frameworks read them).
#pragma once

#include "server/api/api_error.h"
#include "server/api/json_fields.h"

namespace beam::server {

struct OutputFields {
  bool include_usage = false;  // stream_options.include_usage: a usage chunk before [DONE]
  // stream_options.continuous_usage_stats (with include_usage, as vLLM): every chunk carries its
  // choice's usage so far.
  bool continuous_usage = false;
  // return_token_ids: prompt_token_ids and each choice's token_ids (streamed: the chunk's own
  // tokens, the prompt's on the choice's first chunk).
  bool return_token_ids = false;
};

// Reads stream_options and return_token_ids into *out: type errors of the body's fields go to `r`
// (sticky), those inside stream_options come back.
ApiExpected<bool> read_output_fields(FieldReader& r, OutputFields* out);

}  // namespace beam::server
