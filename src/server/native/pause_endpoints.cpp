// Pausing generation for RL weight syncs (native_endpoints.h): vLLM's /pause, /resume and
// /is_paused, SGLang's /pause_generation and /continue_generation, all on Engine::pause / resume.
#include <string>
#include <vector>

#include "server/api/query_string.h"
#include "server/native/native_endpoints.h"

namespace beam::server {
namespace {

// A pause mode by its API name: vLLM's abort / wait / keep, or SGLang's abort / in_place / retract.
ApiExpected<PauseMode> pause_mode(const std::string& name, bool sglang, const std::string& param) {
  if (name == "abort") return PauseMode::kAbort;
  if (!sglang && name == "wait") return PauseMode::kWait;
  if (!sglang && name == "keep") return PauseMode::kKeep;
  if (sglang && name == "in_place") return PauseMode::kKeep;
  if (sglang && name == "retract") return PauseMode::kRetract;
  return invalid_request("'" + param + "': unknown pause mode \"" + name + "\" (expected " +
                             (sglang ? "abort, in_place or retract" : "abort, wait or keep") + ")",
                         param);
}

std::optional<ApiError> pause(const EndpointEnv& env, PauseMode mode, bool clear_cache) {
  const Status st = env.model->engine->pause(mode, clear_cache);
  if (!st.ok()) return invalid_request(st.error().message);
  return std::nullopt;
}

// SGLang's answer: {"message", "status": "ok"} (errors as OpenAI-style 400s).
void answer_sglang(const std::shared_ptr<Exchange>& exchange, const std::string& message) {
  exchange->respond_json(200, dump_json(Json{{"message", message}, {"status", "ok"}}));
}

}  // namespace

void handle_pause(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  const std::string& query = exchange->request().query;
  const std::vector<std::string> modes = query_values(query, "mode");
  ApiExpected<PauseMode> mode = pause_mode(modes.empty() ? "abort" : modes.back(), false, "mode");
  if (!mode.ok()) return exchange->respond_error(mode.error());
  ApiExpected<bool> wait = query_bool(query, "wait_for_inflight_requests", false);
  if (!wait.ok()) return exchange->respond_error(wait.error());
  ApiExpected<bool> clear = query_bool(query, "clear_cache", true);
  if (!clear.ok()) return exchange->respond_error(clear.error());
  if (*wait) *mode = PauseMode::kWait;  // vLLM's deprecated form of mode=wait
  if (const auto error = pause(env, *mode, *clear)) return exchange->respond_error(*error);
  exchange->respond_json(200, dump_json(Json{{"status", "paused"}}));
}

void handle_resume(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  const Status st = env.model->engine->resume();
  if (!st.ok()) return exchange->respond_error(invalid_request(st.error().message));
  exchange->respond_json(200, dump_json(Json{{"status", "resumed"}}));
}

void handle_is_paused(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  exchange->respond_json(200, dump_json(Json{{"is_paused", env.model->engine->paused()}}));
}

void handle_pause_generation(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  ApiExpected<Json> body = parse_optional_json_object(exchange->request().body);
  if (!body.ok()) return exchange->respond_error(body.error());
  std::string name = "abort";
  FieldReader r(*body, "");
  r.read("mode", &name);
  if (r.failed()) return exchange->respond_error(r.take_error());
  ApiExpected<PauseMode> mode = pause_mode(name, true, "mode");
  if (!mode.ok()) return exchange->respond_error(mode.error());
  if (const auto error = pause(env, *mode, /*clear_cache=*/false))
    return exchange->respond_error(*error);
  answer_sglang(exchange, "Generation paused successfully.");
}

void handle_continue_generation(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  const Status st = env.model->engine->resume();
  if (!st.ok()) return exchange->respond_error(invalid_request(st.error().message));
  answer_sglang(exchange, "Generation continued successfully.");
}

}  // namespace beam::server
