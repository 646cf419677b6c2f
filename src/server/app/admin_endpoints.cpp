// Health, metrics and model list (see admin_endpoints.h).
#include "server/app/admin_endpoints.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <optional>

#include "core/version.h"

namespace beam::server {
namespace {

double now_unix_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

HealthVerdict evaluate_health(const HealthInputs& in) {
  if (!in.loaded) return in.load_failed ? HealthVerdict::kFailed : HealthVerdict::kLoading;
  if (in.asleep) return HealthVerdict::kAsleep;
  if (in.paused) return HealthVerdict::kPaused;
  const double last_progress = std::max(in.last_step_unix_s, in.busy_since_unix_s);
  if (in.busy && in.now_unix_s - last_progress > in.stall_s) return HealthVerdict::kStalled;
  return HealthVerdict::kOk;
}

double last_step_unix_s(const std::vector<EngineStats>& replicas) {
  double latest = 0, oldest_busy = std::numeric_limits<double>::infinity();
  for (const EngineStats& r : replicas) {
    latest = std::max(latest, r.last_step_unix_s);
    if (r.running + r.waiting > 0) oldest_busy = std::min(oldest_busy, r.last_step_unix_s);
  }
  return std::isfinite(oldest_busy) ? oldest_busy : latest;
}

void handle_health(const ServerState& state, const std::shared_ptr<Exchange>& exchange) {
  HealthInputs in;
  const ServedModel* model = state.model();
  in.loaded = model != nullptr;
  {
    std::lock_guard<std::mutex> lock(state.load_mu);
    in.load_failed = state.load_error.has_value();
  }
  EngineStats stats;
  if (model) {
    stats = model->engine->stats();
    in.busy = state.counters.active.load() > 0 || stats.running + stats.waiting > 0;
    in.last_step_unix_s = last_step_unix_s(model->engine->replica_stats());
    in.busy_since_unix_s = state.counters.busy_since_unix_s.load();
    in.asleep = model->engine->sleep_state().asleep();
    in.paused = model->engine->paused();
  }
  in.now_unix_s = now_unix_s();
  in.stall_s = state.options.health_stall_s;
  switch (evaluate_health(in)) {
    case HealthVerdict::kOk:
      return exchange->respond_json(200, dump_json(Json{{"status", "ok"}}));
    case HealthVerdict::kAsleep:
      return exchange->respond_json(200, dump_json(Json{{"status", "sleeping"}}));
    case HealthVerdict::kPaused:
      return exchange->respond_json(200, dump_json(Json{{"status", "paused"}}));
    case HealthVerdict::kLoading:
      return exchange->respond_json(503, dump_json(Json{{"status", "loading"}}));
    case HealthVerdict::kFailed:
      return exchange->respond_json(503, dump_json(Json{{"status", "failed"}}));
    case HealthVerdict::kStalled:
      return exchange->respond_json(
          503, dump_json(Json{{"status", "stalled"},
                              {"seconds_since_progress", in.now_unix_s - std::max(in.last_step_unix_s, in.busy_since_unix_s)},
                              {"running", stats.running},
                              {"waiting", stats.waiting}}));
  }
}

void handle_health_generate(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  if (env.model->engine->sleep_state().asleep())
    return exchange->respond_json(
        503, dump_json(Json{{"status", "sleeping"},
                            {"error", "the engine is asleep: nothing runs until /wake_up"}}));
  if (env.model->engine->paused())
    return exchange->respond_json(
        503, dump_json(Json{{"status", "paused"},
                            {"error",
                             "generation is paused: nothing runs until /resume or "
                             "/continue_generation"}}));
  struct Outcome {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<TokenEvent> final;
  };
  auto outcome = std::make_shared<Outcome>();
  GenerateRequest probe;
  probe.prompt = {0};
  probe.sampling.temperature = 0.0;
  probe.sampling.max_tokens = 1;
  probe.sampling.ignore_eos = true;
  probe.priority = std::numeric_limits<int32_t>::max();  // ahead of the queue: it checks the loop
  probe.sink = [outcome](TokenEvent&& event) {
    if (!event.finish) return;
    std::lock_guard<std::mutex> lock(outcome->mu);
    outcome->final = std::move(event);
    outcome->cv.notify_all();
  };
  Expected<RequestId> id = env.model->engine->submit(std::move(probe));
  if (!id.ok())
    return exchange->respond_json(
        503, dump_json(Json{{"status", "failed"}, {"error", id.error().message}}));
  std::unique_lock<std::mutex> lock(outcome->mu);
  if (!outcome->cv.wait_for(lock, std::chrono::seconds(kHealthGenerateTimeoutS),
                            [&] { return outcome->final.has_value(); })) {
    lock.unlock();
    env.model->engine->cancel(*id);
    return exchange->respond_json(
        503, dump_json(Json{
                 {"status", "stalled"},
                 {"error", "no token within " + std::to_string(kHealthGenerateTimeoutS) + " s"}}));
  }
  if (outcome->final->finish != FinishReason::kLength)
    return exchange->respond_json(
        503, dump_json(Json{{"status", "failed"}, {"error", outcome->final->error}}));
  exchange->respond_json(200, dump_json(Json{{"status", "ok"}}));
}

void handle_metrics(const ServerState& state, const std::shared_ptr<Exchange>& exchange) {
  const ServedModel* model = state.model();
  std::optional<EngineStats> stats;
  if (model) stats = model->engine->stats();
  ServerGauges gauges;
  gauges.ready = model != nullptr;
  gauges.open_connections = state.http ? state.http->open_connections() : 0;
  gauges.active_generations = state.counters.active.load();
  if (model) gauges.replicas = model->engine->replica_stats();
  exchange->respond_text(200, "text/plain; version=0.0.4; charset=utf-8", state.metrics.render(stats, gauges));
}

namespace {

// SGLang's avg_spec_accept_length: tokens a verified decode wrote (accepted drafts + 1), on average
// since start; null before any.
Json spec_accept_length(const EngineStats& s) {
  if (s.spec_verifications == 0) return nullptr;
  return static_cast<double>(s.spec_accepted_tokens + s.spec_verifications) /
         static_cast<double>(s.spec_verifications);
}

}  // namespace

void handle_server_info(const ServerState& state, const std::shared_ptr<Exchange>& exchange) {
  const ServedModel& model = *state.model();
  const ServeOptions& o = state.options;
  const EngineOptions& engine = o.model.engine;
  // SGLang's internal_states: one entry per data-parallel replica.
  Json states = Json::array();
  for (const EngineStats& stats : model.engine->replica_stats()) {
    states.push_back(Json{{"last_gen_throughput", stats.generation_tokens_per_s},
                          {"num_running_reqs", stats.running},
                          {"num_waiting_reqs", stats.waiting},
                          {"token_usage", stats.full_pool.usage()},
                          {"avg_spec_accept_length", spec_accept_length(stats)}});
  }
  Json info = {
      {"model_path", model.weights->get().path},
      {"load_format", model.weights->get().load_format},  // "dummy": random weights
      {"tokenizer_path", model.tokenizer_dir},
      {"served_model_name", model.name},
      {"host", o.host},
      {"port", state.http ? state.http->port() : o.port},
      {"device", engine.device == Device::kCuda ? "cuda" : "cpu"},
      {"dtype", "bfloat16"},
      {"context_length", model.max_context_tokens},
      {"max_running_requests", engine.max_running},
      {"chunked_prefill_size", model.engine->max_tokens_per_step()},
      {"page_size", engine.block_size_tokens},
      {"max_total_num_tokens", model.kv_capacity_tokens},
      {"disable_radix_cache", !engine.enable_prefix_cache},
      // SGLang's HiCache settings (hicache_size in GB of 1e9 bytes; 0: from the ratio).
      {"enable_hierarchical_cache", engine.enable_hierarchical_cache},
      {"hicache_ratio", engine.hicache_ratio},
      {"hicache_size", engine.hicache_bytes ? static_cast<double>(*engine.hicache_bytes) / 1e9 : 0.0},
      {"hicache_write_policy", host_write_policy_name(engine.hicache_write_policy)},
      {"disable_cuda_graph", !engine.cuda_graphs},
      {"attention_probs", attention_probs_name(engine.attention_probs)},
      // SGLang's name: a request's output does not depend on the batch around it (on the CPU
      // always; on the GPU with --enable-deterministic-inference).
      {"enable_deterministic_inference", batch_invariant(engine.device, engine.batch_invariance)},
      {"tp_size", engine.tensor_parallel_size},  // SGLang's name: ranks the model is split over
      // SGLang's names: replicas of the engine, and how a request's replica is picked.
      {"dp_size", model.engine->data_parallel_size()},
      {"load_balance_method", load_balance_name(engine.load_balance)},
      {"enable_return_routed_experts", model.routed_experts_enabled},
      {"enable_return_hidden_states", model.hidden_states_enabled},
      {"enable_weight_updates", model.weight_updates_enabled},
      {"enable_memory_saver", model.sleep_mode_enabled},  // SGLang's name for sleep mode
      // SGLang's LoRA settings: adapters one step serves, the highest rank, the loaded adapters.
      {"enable_lora", model.lora_enabled},
      {"max_loras_per_batch", engine.max_loras},
      {"max_lora_rank", engine.max_lora_rank},
      {"max_loaded_loras",
       engine.max_loaded_loras > 0 ? Json(engine.max_loaded_loras) : Json(nullptr)},
      {"lora_paths", adapter_paths(model)},
      {"lora_experts", engine.lora_experts},  // beamserve's: the slots serve the routed experts
      // SGLang's speculative settings (NGRAM: n-gram drafts, DFLASH: a DFlash2 drafter's; the
      // block counts the last token).
      {"speculative_algorithm",
       !engine.speculative.enabled()
           ? Json(nullptr)
           : Json(engine.speculative.dflash2_drafter.empty() ? "NGRAM" : "DFLASH")},
      {"speculative_draft_model_path", engine.speculative.dflash2_drafter.empty()
                                           ? Json(nullptr)
                                           : Json(engine.speculative.dflash2_drafter)},
      {"speculative_num_draft_tokens",
       engine.speculative.enabled() ? Json(model.engine->speculative_draft_tokens() + 1)
                                    : Json(nullptr)},
      {"speculative_ngram_min_match_window_size", engine.speculative.min_match},
      {"speculative_ngram_max_match_window_size", engine.speculative.max_match},
      {"speculative_ngram_capacity", engine.speculative.corpus_tokens},
      {"api_key_required", o.api_key.has_value()},
      {"max_body_bytes", o.max_body_bytes},
      {"worker_threads", o.worker_threads},
      {"internal_states", std::move(states)},
      {"version", kVersion},
  };
  exchange->respond_json(200, dump_json(info));
}

void handle_get_load(const ServerState& state, const std::shared_ptr<Exchange>& exchange) {
  const ServedModel& model = *state.model();
  const int64_t block = state.options.model.engine.block_size_tokens;
  Json loads = Json::array();
  int64_t d = 0;
  for (const EngineStats& s : model.engine->replica_stats())
    loads.push_back(Json{{"dp_rank", d++},
                         {"num_reqs", s.running + s.waiting},
                         {"num_waiting_reqs", s.waiting},
                         {"num_tokens", s.full_pool.used_blocks() * block}});
  exchange->respond_json(200, dump_json(loads));
}

void handle_models(const ServerState& state, const std::shared_ptr<Exchange>& exchange) {
  const ServedModel* model = state.model();
  Json card = {{"id", model->name}, {"object", "model"}, {"created", model->created_unix_s}, {"owned_by", "beamserve"},
               {"max_model_len", model->max_context_tokens}};
  // Each loaded LoRA adapter is a model of its own, its parent the base (vLLM's listing).
  Json cards = Json::array({card});
  for (const LoraAdapterInfo& a : served_adapters(*model)) {
    if (a.name == model->name) continue;  // it shadows the base model under the base's card
    Json lora = card;
    lora["id"] = a.name;
    lora["root"] = a.path;
    lora["parent"] = model->name;
    cards.push_back(std::move(lora));
  }
  const std::string& path = exchange->request().path;
  const std::string prefix = "/v1/models/";
  if (path.rfind(prefix, 0) == 0) {
    const std::string id = path.substr(prefix.size());
    for (const Json& c : cards)
      if (c["id"] == id) return exchange->respond_json(200, dump_json(c));
    return exchange->respond_error(api_error(
        ErrorKind::kNotFound, "The model '" + id + "' does not exist", "model", "model_not_found"));
  }
  exchange->respond_json(200, dump_json(Json{{"object", "list"}, {"data", cards}}));
}

}  // namespace beam::server
