// Chat / completions response-shape fields (see output_fields.h).
#include "server/openai/output_fields.h"

namespace beam::server {

ApiExpected<bool> read_output_fields(FieldReader& r, OutputFields* out) {
  r.read("return_token_ids", &out->return_token_ids);
  const Json* so = r.get("stream_options");
  if (!so) return true;
  if (!so->is_object()) {
    r.fail_type("stream_options", "an object", *so);
    return true;
  }
  FieldReader s(*so, "stream_options");
  s.read("include_usage", &out->include_usage);
  bool continuous = false;
  s.read("continuous_usage_stats", &continuous);
  out->continuous_usage = continuous && out->include_usage;
  if (s.failed()) return s.take_error();
  return true;
}

}  // namespace beam::server
