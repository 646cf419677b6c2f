// serve's flags (see serve_options.h).
#include "cli/serve_options.h"

#include <filesystem>
#include <iterator>
#include <set>
#include <utility>

#include "cli/data_parallel_flags.h"
#include "cli/hicache_flags.h"
#include "cli/lora_flags.h"
#include "cli/model_path.h"
#include "cli/speculative_flags.h"

namespace beam::cli {

Expected<Args> parse_serve_args(int argc, char** argv, std::set<std::string> extra_flags,
                                std::set<std::string> extra_switches) {
  std::set<std::string> flags = {"model",
                                 "tokenizer",
                                 "served-model-name",
                                 "host",
                                 "port",
                                 "api-key",
                                 "max-body-mb",
                                 "kv-budget-mb",
                                 "max-model-len",
                                 "max-running",
                                 "max-tokens-per-step",
                                 "block-size",
                                 "threads",
                                 "io-threads",
                                 "workers",
                                 "no-prefix-cache",
                                 "health-stall-s",
                                 "device",
                                 "no-cuda-graphs",
                                 "attention-probs",
                                 "tensor-parallel-size",
                                 "tp-size",
                                 "enable-return-routed-experts",
                                 "enable-return-hidden-states",
                                 "trust-request-chat-template",
                                 "enable-weight-updates",
                                 "enable-sleep-mode",
                                 "merge-lora",
                                 "load-format",
                                 "enable-lora",
                                 "lora-modules",
                                 "max-loras",
                                 "max-loras-per-batch",
                                 "lora-paths",
                                 "lora-resolver-dir",
                                 "max-lora-rank",
                                 "max-loaded-loras",
                                 "logprobs-mode",
                                 "enable-deterministic-inference"};
  flags.insert(std::begin(kSpeculativeFlags), std::end(kSpeculativeFlags));
  flags.insert(std::begin(kHierarchicalCacheFlags), std::end(kHierarchicalCacheFlags));
  flags.insert(std::begin(kDataParallelFlags), std::end(kDataParallelFlags));
  flags.insert(extra_flags.begin(), extra_flags.end());
  std::set<std::string> switches = {"no-prefix-cache",
                                    "enable-hierarchical-cache",
                                    "no-cuda-graphs",
                                    "enable-return-routed-experts",
                                    "enable-return-hidden-states",
                                    "lora-experts",
                                    "trust-request-chat-template",
                                    "enable-weight-updates",
                                    "enable-sleep-mode",
                                    "enable-lora",
                                    "enable-deterministic-inference"};
  switches.insert(extra_switches.begin(), extra_switches.end());
  flags.insert(switches.begin(), switches.end());
  return Args::parse(argc, argv, flags, switches, {"lora-modules", "lora-paths"});
}

Expected<server::ServeOptions> serve_options_from_args(const Args& a) {
  server::ServeOptions o;
  BEAM_ASSIGN_OR_RETURN(o.model.model_dir, resolve_model_dir(a.get("model")));
  o.model.tokenizer_dir = a.get_or("tokenizer", "");
  o.model.served_model_name = a.get_or("served-model-name", "");
  o.host = a.get_or("host", "127.0.0.1");
  BEAM_ASSIGN_OR_RETURN(int64_t port, a.get_int_in("port", 8000, 0, 65535));
  o.port = static_cast<uint16_t>(port);
  if (a.has("api-key")) {
    o.api_key = a.get("api-key");
  } else if (const char* env = std::getenv("BEAMSERVE_API_KEY"); env && *env) {
    o.api_key = std::string(env);
  }
  if (o.api_key && o.api_key->empty()) return make_error("--api-key must not be empty");
  BEAM_ASSIGN_OR_RETURN(int64_t body_mb, a.get_int_in("max-body-mb", 32, 1, 1 << 20));
  o.max_body_bytes = body_mb << 20;
  BEAM_ASSIGN_OR_RETURN(o.model.engine.device, a.get_device());
  BEAM_ASSIGN_OR_RETURN(o.model.engine.kv_budget_bytes, a.get_mebibytes("kv-budget-mb"));
  // 0: the model's context (max_position_embeddings).
  BEAM_ASSIGN_OR_RETURN(o.model.engine.max_context_tokens,
                        a.get_int_in("max-model-len", 0, 0, int64_t{1} << 31));
  BEAM_ASSIGN_OR_RETURN(o.model.engine.max_running,
                        a.get_int_in("max-running", 256, 1, int64_t{1} << 20));
  if (a.has("max-tokens-per-step")) {  // absent: the engine's default for the device
    BEAM_ASSIGN_OR_RETURN(o.model.engine.max_tokens_per_step,
                          a.get_int_in("max-tokens-per-step", 0, 1, int64_t{1} << 24));
  }
  BEAM_ASSIGN_OR_RETURN(o.model.engine.block_size_tokens,
                        a.get_int_in("block-size", 64, 1, int64_t{1} << 16));
  BEAM_ASSIGN_OR_RETURN(o.model.engine.num_threads, a.get_threads());
  o.model.engine.enable_prefix_cache = !a.has("no-prefix-cache");
  BEAM_RETURN_IF_ERROR(hierarchical_cache_from_args(a, &o.model.engine));
  o.model.engine.cuda_graphs = !a.has("no-cuda-graphs");
  o.model.enable_return_routed_experts = a.has("enable-return-routed-experts");
  o.model.enable_return_hidden_states = a.has("enable-return-hidden-states");
  o.model.trust_request_chat_template = a.has("trust-request-chat-template");
  o.model.enable_weight_updates = a.has("enable-weight-updates");
  o.model.merge_lora_dir = a.get_or("merge-lora", "");
  BEAM_ASSIGN_OR_RETURN(o.model.dummy_weights, a.get_dummy_weights());
  if (o.model.dummy_weights && !o.model.merge_lora_dir.empty())
    return make_error("--merge-lora: the dummy load format has no checkpoint to merge into");
  BEAM_ASSIGN_OR_RETURN(o.model.lora_modules, parse_lora_modules(a.get_all("lora-modules")));
  BEAM_ASSIGN_OR_RETURN(auto lora_paths, parse_lora_paths(a.get_all("lora-paths")));
  o.model.lora_modules.insert(o.model.lora_modules.end(), lora_paths.begin(), lora_paths.end());
  o.model.lora_resolver_dir = a.get_or("lora-resolver-dir", "");
  if (!o.model.lora_resolver_dir.empty() &&
      !std::filesystem::is_directory(o.model.lora_resolver_dir))
    return make_error("--lora-resolver-dir " + o.model.lora_resolver_dir + " is not a directory");
  const bool lora =
      a.has("enable-lora") || !o.model.lora_modules.empty() || a.has("lora-resolver-dir");
  if (a.has("max-loras") && a.has("max-loras-per-batch"))
    return make_error(
        "--max-loras and --max-loras-per-batch (SGLang's name) are one setting: give one");
  BEAM_ASSIGN_OR_RETURN(
      int64_t max_loras,
      a.get_int(a.has("max-loras-per-batch") ? "max-loras-per-batch" : "max-loras", lora ? 4 : 0));
  BEAM_ASSIGN_OR_RETURN(int64_t max_lora_rank, a.get_int("max-lora-rank", 16));
  if (max_loras < 0 || max_loras > 64 || max_lora_rank < 1 || max_lora_rank > 512)
    return make_error("--max-loras must be in [0, 64] and --max-lora-rank in [1, 512], got " +
                      std::to_string(max_loras) + " and " + std::to_string(max_lora_rank));
  if (max_loras == 0 && lora)
    return make_error("--lora-modules and --enable-lora need --max-loras >= 1");
  o.model.engine.max_loras = static_cast<int>(max_loras);
  o.model.engine.max_lora_rank = static_cast<int>(max_lora_rank);
  BEAM_ASSIGN_OR_RETURN(int64_t max_loaded, a.get_int("max-loaded-loras", 0));
  if (a.has("max-loaded-loras") &&
      (max_loaded < max_loras || max_loaded < 1 || max_loaded > 1 << 20))
    return make_error("--max-loaded-loras must be at least --max-loras (" +
                      std::to_string(max_loras) + ") and at least 1, got " +
                      std::to_string(max_loaded));
  if (max_loaded > 0 && static_cast<int64_t>(o.model.lora_modules.size()) > max_loaded)
    return make_error("--lora-modules names " + std::to_string(o.model.lora_modules.size()) +
                      " adapters, more than --max-loaded-loras " + std::to_string(max_loaded));
  o.model.engine.max_loaded_loras = static_cast<int>(max_loaded);
  o.model.engine.lora_experts = a.has("lora-experts");
  if (o.model.engine.lora_experts && max_loras == 0)
    return make_error(
        "--lora-experts needs LoRA served per request (--enable-lora, "
        "--lora-modules or --max-loras >= 1)");
  o.model.engine.enable_sleep_mode = a.has("enable-sleep-mode");
  const std::string logprobs_mode = a.get_or("logprobs-mode", "scaled");
  std::optional<LogprobsMode> mode = parse_logprobs_mode(logprobs_mode);
  if (!mode)
    return make_error("--logprobs-mode must be scaled or raw, got '" + logprobs_mode + "'");
  o.model.logprobs_mode = *mode;
  BEAM_ASSIGN_OR_RETURN(o.model.engine.attention_probs, a.get_attention_probs());
  o.model.engine.batch_invariance = a.get_batch_invariance();
  if (a.has("tensor-parallel-size") && a.has("tp-size"))
    return make_error(
        "--tensor-parallel-size and --tp-size (SGLang's name) are one setting: give one");
  BEAM_ASSIGN_OR_RETURN(int64_t tp,
                        a.get_int(a.has("tp-size") ? "tp-size" : "tensor-parallel-size", 1));
  if (tp < 1 || tp > 64)
    return make_error("--tensor-parallel-size must be in [1, 64], got " + std::to_string(tp));
  o.model.engine.tensor_parallel_size = static_cast<int>(tp);
  BEAM_RETURN_IF_ERROR(data_parallel_from_args(a, &o.model.engine));
  BEAM_ASSIGN_OR_RETURN(o.model.engine.speculative, speculative_from_args(a));
  BEAM_ASSIGN_OR_RETURN(int64_t io_threads, a.get_int_in("io-threads", 1, 1, Args::kMaxThreads));
  BEAM_ASSIGN_OR_RETURN(int64_t workers, a.get_int_in("workers", 2, 1, Args::kMaxThreads));
  o.io_threads = static_cast<int>(io_threads);
  o.worker_threads = static_cast<int>(workers);
  BEAM_ASSIGN_OR_RETURN(o.health_stall_s, a.get_double_in("health-stall-s", 30, 0.001, 1e9));
  return o;
}

}  // namespace beam::cli
