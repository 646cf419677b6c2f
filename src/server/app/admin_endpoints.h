// GET /health, GET /health_generate, GET /metrics, GET /v1/models and GET /get_server_info.
#pragma once

#include <memory>
#include <vector>

#include "server/app/server_state.h"

namespace beam::server {

enum class HealthVerdict { kOk, kLoading, kFailed, kStalled, kAsleep, kPaused };

struct HealthInputs {
  bool loaded = false;
  bool load_failed = false;
  bool busy = false;               // requests submitted or in the engine
  bool asleep = false;             // sleep mode: the engine sleeps on purpose (Engine::sleep)
  bool paused = false;             // generation is paused on purpose (Engine::pause)
  double last_step_unix_s = 0;     // the engine loop's last step
  double busy_since_unix_s = 0;    // when the server last went from idle to busy
  double now_unix_s = 0;
  double stall_s = 30;
};

// Stalled: busy, and neither a step nor the start of the current busy period within stall_s;
// asleep or paused is never stalled (requests wait for the wake-up or the resume on purpose).
HealthVerdict evaluate_health(const HealthInputs& in);

// HealthInputs::last_step_unix_s of an engine of these data-parallel replicas: the oldest last
// step among the replicas that hold requests (one stuck replica stalls the server's health though
// the others step), else the latest of all (0 for none).
double last_step_unix_s(const std::vector<EngineStats>& replicas);

// 200 {"status": "ok"} when the model is loaded and the engine loop advances, 200 {"status":
// "sleeping"} while sleep mode holds its memory back, 200 {"status": "paused"} while generation is
// paused; 503 with "loading",
// "failed" or "stalled" (work has waited health_stall_s without an engine step) otherwise.
void handle_health(const ServerState& state, const std::shared_ptr<Exchange>& exchange);
// SGLang's /health_generate: a one-token greedy generation ahead of the queue; 200 {"status":
// "ok"} once it finishes, 503 "failed" (the engine refused or failed it), "stalled" (no token
// within kHealthGenerateTimeoutS seconds) or, at once, "sleeping" (sleep mode).
inline constexpr int kHealthGenerateTimeoutS = 20;
void handle_health_generate(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
void handle_metrics(const ServerState& state, const std::shared_ptr<Exchange>& exchange);
void handle_models(const ServerState& state, const std::shared_ptr<Exchange>& exchange);
// SGLang's GET /get_server_info: the serving settings under SGLang's argument names where one
// means the same (model_path, context_length, chunked_prefill_size, page_size, ...; never the API
// key itself), "internal_states" [{last_gen_throughput (tokens/s over the last few seconds),
// num_running_reqs, num_waiting_reqs, token_usage (full-attention KV in use)}] and "version".
void handle_server_info(const ServerState& state, const std::shared_ptr<Exchange>& exchange);
// SGLang's GET /get_load (what its router polls): per data-parallel replica, {"dp_rank",
// "num_reqs" (running and waiting sequences), "num_waiting_reqs", "num_tokens" (tokens the
// full-attention pool holds for them)}.
void handle_get_load(const ServerState& state, const std::shared_ptr<Exchange>& exchange);

}  // namespace beam::server
