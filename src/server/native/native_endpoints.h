// beamserve's native endpoints: POST /tokenize (text or a chat conversation → ids), POST
// /detokenize (ids → text), and POST /generate (token ids in, token ids + logprobs out, optionally
// streamed) for RL trainers and tools that manage their own prompts; weight updates and prefix
// cache flushes for RL loops.
#pragma once

#include <memory>

#include "server/api/endpoint_env.h"

namespace beam::server {

void handle_tokenize(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
void handle_detokenize(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
void handle_generate(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
// Serves the weights of a checkpoint folder of the same architecture (SGLang's
// update_weights_from_disk: model_path, abort_all_requests; Engine::update_weights), with
// --enable-weight-updates only.
void handle_update_weights_from_disk(const EndpointEnv& env,
                                     const std::shared_ptr<Exchange>& exchange);
// Ends the requests sent with `rid` (SGLang's /generate rid), or every request in progress with
// abort_all (SGLang's /abort_request): each answers what it generated so far, finish reason
// abort. 200 {"aborted": count}.
void handle_abort_request(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
// SGLang's model info: {"model_path" (the checkpoint served now), "tokenizer_path",
// "is_generation": true, "preferred_sampling_params": null, "weight_version"}.
void handle_get_model_info(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
// SGLang's GET /get_weights_by_name: {"name": a checkpoint tensor (BEAM.md 0a's names),
// "truncate_size": 100} in the body or the query string; answers its first truncate_size rows as
// the model serves them (Engine::read_weight: f32, gathered over the ranks) as JSON lists, or a
// 400 naming the tensor. With --enable-weight-updates only (it reads the weights out).
void handle_get_weights_by_name(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
// SGLang's {"weight_version"}: "default", or the tag of the last /update_weights_from_disk.
void handle_get_weight_version(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
// Drops every cached prefix no request is using (SGLang's /flush_cache, vLLM's
// /reset_prefix_cache).
void handle_flush_cache(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
// Per-request LoRA adapters (serve --max-loras / --lora-modules; Engine::load_lora_adapter):
// vLLM's POST /v1/load_lora_adapter {"lora_name", "lora_path"} and /v1/unload_lora_adapter
// {"lora_name"} answer 200 "Success: ..." (errors: 400, or 404 for an unknown name); SGLang's
// POST /load_lora_adapter and /unload_lora_adapter answer {"success", "error_message",
// "loaded_adapters": {name: path}} (400 on failure). A loaded adapter is served as a model of its
// name ("model" of the OpenAI / Anthropic endpoints, SGLang's lora_path).
void handle_load_lora_adapter(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
void handle_unload_lora_adapter(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
void handle_sglang_load_lora_adapter(const EndpointEnv& env,
                                     const std::shared_ptr<Exchange>& exchange);
void handle_sglang_unload_lora_adapter(const EndpointEnv& env,
                                       const std::shared_ptr<Exchange>& exchange);
// Sleep mode (serve --enable-sleep-mode; Engine::sleep / wake_up), for RL loops that train on the
// same GPU. vLLM's POST /sleep?level=1|2 (default 1) and POST /wake_up[?tags=weights][&tags=
// kv_cache] (no tags: both) answer 200 {}; GET /is_sleeping {"is_sleeping"}. SGLang's POST
// /release_memory_occupation (level 1) and /resume_memory_occupation with {"tags": [...]}
// (absent: both) answer {"success", "message"}. Errors are 400s naming the problem.
void handle_sleep(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
void handle_wake_up(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
void handle_is_sleeping(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
void handle_release_memory_occupation(const EndpointEnv& env,
                                      const std::shared_ptr<Exchange>& exchange);
void handle_resume_memory_occupation(const EndpointEnv& env,
                                     const std::shared_ptr<Exchange>& exchange);
// Pausing generation for RL weight syncs (Engine::pause / resume). vLLM's POST
// /pause?mode=abort|wait|keep (default abort; wait_for_inflight_requests=true means wait) &
// clear_cache=true|false (default true; keep never clears) answers {"status": "paused"}, POST
// /resume {"status": "resumed"}, GET /is_paused {"is_paused"}. SGLang's POST /pause_generation
// with {"mode": "abort" | "in_place" | "retract"} (default abort; the prefix cache stays) and POST
// /continue_generation answer {"message", "status": "ok"}. Errors are 400s naming the field.
void handle_pause(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
void handle_resume(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
void handle_is_paused(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
void handle_pause_generation(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
void handle_continue_generation(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);

}  // namespace beam::server
