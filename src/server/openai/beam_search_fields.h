// vLLM's beam-search fields of chat and completions requests: use_beam_search (n is the beam
// width) and length_penalty (beam_search_run.h runs it).
#pragma once

#include "server/api/json_fields.h"

namespace beam::server {

struct BeamSearchFields {
  bool enabled = false;
  double length_penalty = 1.0;  // score = cumulative logprob / length ^ length_penalty
};

// Reads use_beam_search and length_penalty into *out; errors go to `r` (sticky).
void read_beam_search_fields(FieldReader& r, BeamSearchFields* out);

}  // namespace beam::server
