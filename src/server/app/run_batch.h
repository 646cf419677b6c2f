// vLLM's run-batch (OpenAI's Batch API file format) in process: each input line
// {"custom_id", "method": "POST", "url", "body"} goes through the server's own routes
// (ServerApp::submit) and its answer comes out as one line {"id", "custom_id", "response":
// {"status_code", "request_id", "body"}, "error": null}, in input order; a line that cannot be
// sent (bad JSON, a missing field, an unknown or non-inference url, stream: true) gets "response":
// null and "error": {"code", "message"} naming the line. Up to max_in_flight requests run at once,
// so the engine batches them.
#pragma once

#include <cstdint>
#include <istream>
#include <ostream>

#include "core/status.h"
#include "server/app/server_app.h"

namespace beam::server {

struct BatchCounts {
  int64_t lines = 0;   // non-blank input lines
  int64_t ok = 0;      // answered with a 2xx
  int64_t failed = 0;  // answered with an error status, or not sent
};

// Reads the whole input, writes one output line per non-blank input line; an error only when the
// output cannot be written.
Expected<BatchCounts> run_batch(ServerApp& app, std::istream& in, std::ostream& out,
                                int64_t max_in_flight);

}  // namespace beam::server
