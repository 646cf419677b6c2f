// Sleep mode's endpoints (native_endpoints.h): vLLM's /sleep, /wake_up and /is_sleeping, SGLang's
// /release_memory_occupation and /resume_memory_occupation, all on Engine::sleep / wake_up.
#include <string>
#include <string_view>
#include <vector>

#include "server/api/query_string.h"
#include "server/native/native_endpoints.h"

namespace beam::server {
namespace {

// Which memory a tag list names (weights, kv_cache; SGLang's cuda_graph stays, so it is accepted
// and changes nothing); none: both. An error names an unknown tag.
struct Tags {
  bool weights = true, kv_cache = true;
};
ApiExpected<Tags> read_tags(const std::vector<std::string>& tags, const std::string& param) {
  if (tags.empty()) return Tags{};
  Tags out{false, false};
  for (const std::string& t : tags) {
    if (t == "weights")
      out.weights = true;
    else if (t == "kv_cache")
      out.kv_cache = true;
    else if (t != "cuda_graph")
      return invalid_request(
          "'" + param + "': unknown tag \"" + t + "\" (expected weights, kv_cache or cuda_graph)",
          param);
  }
  return out;
}

// The 400 of a server started without --enable-sleep-mode, if so.
std::optional<ApiError> sleep_mode_off(const EndpointEnv& env) {
  if (env.model->sleep_mode_enabled) return std::nullopt;
  return invalid_request("sleep mode is off: start the server with --enable-sleep-mode");
}

// Sleeps at `level`, releasing what `tags` names: level 2 drops the weights, which only
// /update_weights_from_disk brings back.
std::optional<ApiError> sleep_at(const EndpointEnv& env, SleepLevel level, const Tags& tags,
                                 const std::string& param) {
  if (auto off = sleep_mode_off(env)) return off;
  if (level == SleepLevel::kDiscardWeights && !env.model->weight_updates_enabled)
    return invalid_request(
        "'" + param +
            "': level 2 drops the weights, and only /update_weights_from_disk brings "
            "new ones: start the server with --enable-weight-updates too",
        param);
  const Status st = env.model->engine->sleep(level, tags.weights, tags.kv_cache);
  if (!st.ok()) return invalid_request(st.error().message);
  return std::nullopt;
}

std::optional<ApiError> wake(const EndpointEnv& env, const Tags& tags) {
  if (auto off = sleep_mode_off(env)) return off;
  const Status st = env.model->engine->wake_up(tags.weights, tags.kv_cache);
  if (!st.ok()) return invalid_request(st.error().message);
  return std::nullopt;
}

// SGLang's answer: {"success", "message"}, 200 or 400.
void answer_sglang(const std::shared_ptr<Exchange>& exchange, const std::optional<ApiError>& error,
                   const std::string& done) {
  exchange->respond_json(
      error ? 400 : 200,
      dump_json(Json{{"success", !error}, {"message", error ? error->message : done}}));
}

// SGLang's body: {"tags": [...]} (optional; the body may be empty).
ApiExpected<Tags> sglang_tags(const std::shared_ptr<Exchange>& exchange) {
  ApiExpected<Json> body = parse_optional_json_object(exchange->request().body);
  if (!body.ok()) return body.error();
  const Json* tags = body->contains("tags") ? &(*body)["tags"] : nullptr;
  if (!tags || tags->is_null()) return Tags{};
  if (!tags->is_array()) return invalid_request("'tags': expected a list of strings", "tags");
  std::vector<std::string> names;
  for (const Json& t : *tags) {
    if (!t.is_string()) return invalid_request("'tags': expected a list of strings", "tags");
    names.push_back(t.get<std::string>());
  }
  return read_tags(names, "tags");
}

}  // namespace

void handle_sleep(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  const std::vector<std::string> levels = query_values(exchange->request().query, "level");
  const std::string level = levels.empty() ? "1" : levels.back();
  if (level != "1" && level != "2")
    return exchange->respond_error(
        invalid_request("'level': expected 1 or 2, got \"" + level + "\"", "level"));
  const auto error =
      sleep_at(env, level == "1" ? SleepLevel::kOffloadWeights : SleepLevel::kDiscardWeights,
               Tags{}, "level");
  if (error) return exchange->respond_error(*error);
  exchange->respond_json(200, "{}");
}

void handle_wake_up(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  ApiExpected<Tags> tags = read_tags(query_values(exchange->request().query, "tags"), "tags");
  if (!tags.ok()) return exchange->respond_error(tags.error());
  if (const auto error = wake(env, *tags)) return exchange->respond_error(*error);
  exchange->respond_json(200, "{}");
}

void handle_is_sleeping(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  exchange->respond_json(
      200, dump_json(Json{{"is_sleeping", env.model->engine->sleep_state().asleep()}}));
}

void handle_release_memory_occupation(const EndpointEnv& env,
                                      const std::shared_ptr<Exchange>& exchange) {
  ApiExpected<Tags> tags = sglang_tags(exchange);
  if (!tags.ok()) return answer_sglang(exchange, tags.error(), "");
  answer_sglang(exchange, sleep_at(env, SleepLevel::kOffloadWeights, *tags, "tags"),
                "Succeeded to release memory occupation.");
}

void handle_resume_memory_occupation(const EndpointEnv& env,
                                     const std::shared_ptr<Exchange>& exchange) {
  ApiExpected<Tags> tags = sglang_tags(exchange);
  if (!tags.ok()) return answer_sglang(exchange, tags.error(), "");
  answer_sglang(exchange, wake(env, *tags), "Succeeded to resume memory occupation.");
}

}  // namespace beam::server
