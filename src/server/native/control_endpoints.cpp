// The RL loop's control endpoints: POST /update_weights_from_disk (SGLang's, for trainers that
// save a checkpoint each step), POST /flush_cache (SGLang's), POST /reset_prefix_cache (vLLM's)
// POST /abort_request, GET /get_model_info and GET /get_weight_version (SGLang's). See
// native_endpoints.h.
#include <chrono>

#include "core/logging.h"
#include "model/tensor_parallel.h"
#include "model/weights.h"
#include "server/native/native_endpoints.h"

namespace beam::server {
namespace {

// SGLang's answer: {"success", "message", "num_paused_requests"}, 200 or 400.
void answer_update(const std::shared_ptr<Exchange>& exchange, bool success,
                   const std::string& message) {
  exchange->respond_json(
      success ? 200 : 400,
      dump_json(Json{{"success", success}, {"message", message}, {"num_paused_requests", 0}}));
}

}  // namespace

void handle_update_weights_from_disk(const EndpointEnv& env,
                                     const std::shared_ptr<Exchange>& exchange) {
  if (!env.model->weight_updates_enabled)
    return answer_update(exchange, false,
                         "weight updates are off: start the server with --enable-weight-updates");
  ApiExpected<Json> body = parse_json_body(exchange->request().body);
  if (!body.ok()) return exchange->respond_error(body.error());
  FieldReader r(*body, "");
  std::string model_path;
  r.require("model_path", &model_path);
  std::optional<std::string> load_format;
  r.read("load_format", &load_format);
  if (load_format && *load_format != "auto" && *load_format != "safetensors")
    r.fail("load_format", "expected \"auto\" or \"safetensors\", got \"" + *load_format + "\"");
  std::optional<std::string> weight_version;
  r.read("weight_version", &weight_version);
  std::string merge_lora_path;  // beamserve's: a PEFT LoRA adapter merged into model_path's weights
  r.read("merge_lora_path", &merge_lora_path);
  bool abort_all = false, flush_cache = true;
  r.read("abort_all_requests", &abort_all);
  r.read("flush_cache", &flush_cache);
  if (!flush_cache)
    r.fail("flush_cache", "must be true: cached prefixes hold KV of the old weights");
  if (r.failed()) return exchange->respond_error(r.take_error());
  const auto start = std::chrono::steady_clock::now();
  Engine& engine = *env.model->engine;
  const ExpertCopy copy = expert_copy_for(engine.device());
  // Read once this call holds the update's turn (a second update meanwhile is refused before it
  // reads a second copy) and while the engine still serves.
  const Status st = engine.update_weights(
      [&]() -> Expected<RankWeights> {
        if (engine.tensor_parallel_size() == 1) {  // checked here, the engine still serving
          Expected<std::shared_ptr<BeamWeights>> weights =
              load_beam_weights_merging(model_path, merge_lora_path, {}, copy);
          if (!weights.ok())
            return make_error("loading '" + model_path + "': " + weights.error().message);
          // One rank's host copy, served as loaded.
          if (copy == ExpertCopy::kHost) return slices_of(std::move(*weights));
        }
        // Loaded when the update applies, once the requests in flight finished: each rank its
        // experts (one rank at a time), and on a GPU the experts stay in the files until the
        // copy, so the folder is read in one go then (a trainer saving its next step into the
        // same folder meanwhile cannot leave the copy half old, half new).
        const RankWeights from_disk = load_rank_weights(model_path, merge_lora_path, copy);
        return RankWeights([from_disk, model_path](TensorParallel tp)
                               -> Expected<std::shared_ptr<const BeamWeights>> {
          Expected<std::shared_ptr<const BeamWeights>> w = from_disk(tp);
          if (!w.ok()) return make_error("loading '" + model_path + "': " + w.error().message);
          return w;
        });
      },
      abort_all);
  if (!st.ok()) return answer_update(exchange, false, st.error().message);
  log_info("serving the weights of " + model_path +
           (merge_lora_path.empty() ? "" : " with the LoRA adapter " + merge_lora_path));
  ServedWeights::Info served = env.model->weights->get();
  env.model->weights->set(
      {model_path, weight_version.value_or(served.version), load_format.value_or("auto")});
  env.metrics->observe_weight_update(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  answer_update(exchange, true, "Succeeded to update model weights.");
}

void handle_abort_request(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  ApiExpected<Json> body = parse_json_body(exchange->request().body);
  if (!body.ok()) return exchange->respond_error(body.error());
  FieldReader r(*body, "");
  std::optional<std::string> rid;
  bool abort_all = false;
  r.read("rid", &rid);
  r.read("abort_all", &abort_all);
  if (!rid && !abort_all) r.fail("rid", "give the request's 'rid', or 'abort_all': true");
  if (r.failed()) return exchange->respond_error(r.take_error());
  const int64_t aborted = abort_all ? env.jobs->abort_all() : env.jobs->abort(*rid);
  exchange->respond_json(200, dump_json(Json{{"aborted", aborted}}));
}

void handle_get_model_info(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  const ServedWeights::Info w = env.model->weights->get();
  // SGLang's --preferred-sampling-params: here the generation_config.json defaults.
  const Json& defaults = env.model->sampling_defaults;
  const Json preferred = defaults.empty() ? Json(nullptr) : defaults;
  exchange->respond_json(200, dump_json(Json{{"model_path", w.path},
                                             {"tokenizer_path", env.model->tokenizer_dir},
                                             {"is_generation", true},
                                             {"preferred_sampling_params", preferred},
                                             {"weight_version", w.version}}));
}

void handle_get_weight_version(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  exchange->respond_json(200,
                         dump_json(Json{{"weight_version", env.model->weights->get().version}}));
}

void handle_flush_cache(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  env.model->engine->flush_prefix_cache();
  exchange->respond_text(200, "text/plain; charset=utf-8", "Cache flushed.\n");
}

}  // namespace beam::server
