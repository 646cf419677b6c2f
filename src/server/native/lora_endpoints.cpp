// Per-request LoRA adapters loaded and unloaded at run time (Engine::load_lora_adapter): vLLM's
// POST /v1/load_lora_adapter and /v1/unload_lora_adapter ({"lora_name", "lora_path"}; 200 with a
// text line, errors 400 / 404 as OpenAI errors) and SGLang's POST /load_lora_adapter and
// /unload_lora_adapter ({"success", "error_message", "loaded_adapters": {name: path}}). See
// native_endpoints.h.
#include "core/logging.h"
#include "runtime/lora_registry.h"
#include "server/native/native_endpoints.h"

namespace beam::server {
namespace {

// The request's lora_name (and lora_path when loading), or the error to answer.
struct LoraFields {
  std::string name, path;
  bool inplace = false;  // vLLM's load_inplace: replace an adapter loaded under the name
  bool pinned = false;   // SGLang's: the adapter keeps its slot (Engine::load_lora_adapter)
};

ApiExpected<LoraFields> read_lora_fields(const EndpointEnv& env,
                                         const std::shared_ptr<Exchange>& exchange, bool load) {
  if (!env.model->lora_enabled)
    return invalid_request(
        "LoRA adapters are off: start the server with --max-loras N (or --lora-modules)");
  API_ASSIGN_OR_RETURN(Json body, parse_json_body(exchange->request().body));
  FieldReader r(body, "");
  LoraFields f;
  r.require("lora_name", &f.name);
  if (load) {
    r.require("lora_path", &f.path);
    r.read("load_inplace", &f.inplace);
    r.read("pinned", &f.pinned);
  }
  if (r.failed()) return r.take_error();
  return f;
}

// Loads (load) or unloads the named adapter; the engine's error as a Status.
Status apply(const EndpointEnv& env, const LoraFields& f, bool load) {
  Engine& engine = *env.model->engine;
  const Status st = load ? engine.load_lora_adapter(f.name, f.path, f.inplace, f.pinned)
                         : engine.unload_lora_adapter(f.name);
  if (st.ok())
    log_info(load ? "loaded the LoRA adapter '" + f.name + "' from " + f.path +
                        (f.pinned ? " (pinned)" : "")
                  : "unloaded the LoRA adapter '" + f.name + "'");
  return st;
}

void handle_vllm(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange, bool load) {
  ApiExpected<LoraFields> f = read_lora_fields(env, exchange, load);
  if (!f.ok()) return exchange->respond_error(f.error());
  const Status st = apply(env, *f, load);
  if (!st.ok()) {
    const bool missing = !load && st.error().message == lora_not_loaded(f->name);
    return exchange->respond_error(missing ? api_error(ErrorKind::kNotFound, st.error().message,
                                                       "lora_name", "model_not_found")
                                           : invalid_request(st.error().message, "lora_name"));
  }
  exchange->respond_text(
      200, "text/plain; charset=utf-8",
      "Success: LoRA adapter '" + f->name + "' " + (load ? "added" : "removed") + " successfully.");
}

void handle_sglang(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange, bool load) {
  ApiExpected<LoraFields> f = read_lora_fields(env, exchange, load);
  if (!f.ok()) return exchange->respond_error(f.error());
  const Status st = apply(env, *f, load);
  exchange->respond_json(
      st.ok() ? 200 : 400,
      dump_json(Json{{"success", st.ok()},
                     {"error_message", st.ok() ? Json(nullptr) : Json(st.error().message)},
                     {"loaded_adapters", adapter_paths(*env.model)}}));
}

}  // namespace

void handle_load_lora_adapter(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  handle_vllm(env, exchange, /*load=*/true);
}
void handle_unload_lora_adapter(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  handle_vllm(env, exchange, /*load=*/false);
}
void handle_sglang_load_lora_adapter(const EndpointEnv& env,
                                     const std::shared_ptr<Exchange>& exchange) {
  handle_sglang(env, exchange, /*load=*/true);
}
void handle_sglang_unload_lora_adapter(const EndpointEnv& env,
                                       const std::shared_ptr<Exchange>& exchange) {
  handle_sglang(env, exchange, /*load=*/false);
}

}  // namespace beam::server
