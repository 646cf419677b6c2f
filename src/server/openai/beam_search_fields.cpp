// Beam-search request fields (see beam_search_fields.h).
#include "server/openai/beam_search_fields.h"

#include <cmath>

namespace beam::server {

void read_beam_search_fields(FieldReader& r, BeamSearchFields* out) {
  r.read("use_beam_search", &out->enabled);
  r.read("length_penalty", &out->length_penalty);
  if (!std::isfinite(out->length_penalty)) r.fail("length_penalty", "must be a finite number");
}

}  // namespace beam::server
