// bench_common: device, beam-slice weights and the report header shared by the GPU benchmarks.
#include "cli/bench_common.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <thread>

#include "kernels/api/device_memory.h"
#include "model/synthetic_weights.h"
#include "runtime/bench/device_timer.h"

namespace beam::cli {

std::set<std::string> bench_common_flags() {
  return {"device",      "threads", "config", "layers",         "dense-layers",
          "weight-seed", "json",    "commit", "attention-probs"};
}

std::set<std::string> bench_common_bool_flags() {
  return {"no-cuda-graphs", "no-pdl", "enable-deterministic-inference"};
}

int bench_fail(const std::string& message) {
  std::fprintf(stderr, "bench: %s\n", message.c_str());
  return 1;
}

Expected<std::unique_ptr<BenchDevice>> open_bench_device(const Args& args) {
  BEAM_ASSIGN_OR_RETURN(Device device, args.get_device());
  BEAM_ASSIGN_OR_RETURN(const int threads, args.get_threads());
  auto d = std::make_unique<BenchDevice>();
  const int n = threads > 0 ? threads
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  d->pool = std::make_unique<ThreadPool>(n);
  d->ctx.device = device;
  d->ctx.pool = d->pool.get();
  d->ctx.cuda_graphs = !args.has("no-cuda-graphs");
  BEAM_ASSIGN_OR_RETURN(d->ctx.attention_probs, args.get_attention_probs());
  d->ctx.batch_invariance = args.get_batch_invariance();
  switch (device) {
    case Device::kCpu:
      break;
    case Device::kCuda:
      BEAM_ASSIGN_OR_RETURN(d->cuda, create_cuda_context(0));
      set_programmatic_launch(*d->cuda, !args.has("no-pdl"));
      d->ctx.cuda = d->cuda.get();
      break;
  }
  return d;
}

Expected<BeamConfig> slice_config_from_args(const Args& args, int64_t default_layers) {
  const std::string dir = args.get_or("config", "models/beam-1.0-config");
  BEAM_ASSIGN_OR_RETURN(BeamConfig base, load_beam_config(dir));
  SliceOptions o;
  BEAM_ASSIGN_OR_RETURN(o.num_layers, args.get_int("layers", default_layers));
  BEAM_ASSIGN_OR_RETURN(o.num_dense_layers, args.get_int("dense-layers", 1));
  return slice_config(base, o);
}

Expected<std::shared_ptr<BeamWeights>> synthetic_weights_from_args(const Args& args,
                                                                   const KernelContext& ctx,
                                                                   const BeamConfig& config) {
  SyntheticWeightOptions o;
  BEAM_ASSIGN_OR_RETURN(int64_t seed, args.get_int("weight-seed", 1));
  o.seed = static_cast<uint64_t>(seed);
  const auto start = std::chrono::steady_clock::now();
  auto made = make_synthetic_weights(ctx, config, o);
  if (!made.ok())
    return make_error(made.error().message + " (the random weights of " +
                      std::to_string(config.num_layers) + " layers take " +
                      std::to_string(synthetic_weight_bytes(config) >> 30) +
                      " GiB; --layers N takes fewer)");
  std::shared_ptr<BeamWeights> w = std::move(*made);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "bench: %.2f GB of random weights (%lld layers) on %s in %.1f s\n",
               static_cast<double>(synthetic_weight_bytes(config)) / 1e9,
               static_cast<long long>(config.num_layers), describe_device(ctx).c_str(), s);
  return w;
}

namespace {

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json model_json(const BeamConfig& c) {
  std::vector<std::string> attn, mlp;
  for (AttentionKind k : c.layer_types) attn.emplace_back(attention_kind_name(k));
  for (MlpKind k : c.mlp_layer_types) mlp.emplace_back(mlp_kind_name(k));
  return {{"name", "beam-slice"},
          {"layers", c.num_layers},
          {"hidden", c.hidden_size},
          {"heads", c.num_heads},
          {"kv_heads", c.num_kv_heads},
          {"head_dim", c.head_dim},
          {"vocab", c.vocab_size},
          {"experts", c.num_experts},
          {"top_k", c.num_experts_per_tok},
          {"groups", c.num_groups},
          {"topk_groups", c.topk_groups},
          {"expert_width", c.moe_intermediate_size},
          {"dense_width", c.intermediate_size},
          {"window", c.sliding_window},
          {"layer_types", attn},
          {"mlp_layer_types", mlp},
          {"weights", "random bf16 (std 0.02, norms ~1)"}};
}

}  // namespace

nlohmann::json report_header(const std::string& benchmark, const Args& args,
                             const KernelContext& ctx, const BeamConfig& config,
                             const std::string& command) {
  std::string commit = args.get_or("commit", "");
  if (commit.empty()) {
    const char* env = std::getenv("BEAMSERVE_COMMIT");
    commit = env && *env ? env : "unknown";
  }
  return {{"benchmark", benchmark},
          {"date", utc_now()},
          {"commit", commit},
          {"device", device_name(ctx)},
          {"device_memory", describe_device(ctx)},
          {"command", command},
          {"cuda_graphs", ctx.cuda_graphs},
          {"attention_probs", attention_probs_name(ctx.attention_probs)},
          {"deterministic_inference", batch_invariant(ctx)},
          {"programmatic_launch", ctx.cuda != nullptr && programmatic_launch(*ctx.cuda)},
          {"model", model_json(config)}};
}

int emit_report(const nlohmann::json& report, const Args& args) {
  const std::string text = report.dump(2);
  std::printf("%s\n", text.c_str());
  if (auto path = args.get("json")) {
    std::ofstream f(*path);
    f << text << "\n";
    if (!f) return bench_fail("cannot write --json " + *path);
  }
  return 0;
}

std::string command_line(const std::string& benchmark, int argc, char** argv) {
  std::string s = "beamserve bench " + benchmark;
  for (int i = 0; i < argc; ++i) s += std::string(" ") + argv[i];
  return s;
}

nlohmann::json bench_result_json(const BenchResult& r) {
  return {{"requests", r.requests},
          {"failed_requests", r.failed},
          {"prompt_tokens", r.prompt_tokens},
          {"cached_prompt_tokens", r.cached_prompt_tokens},
          {"output_tokens", r.output_tokens},
          {"wall_s", r.wall_s},
          {"output_tokens_per_s", r.output_tokens_per_s},
          {"total_tokens_per_s", r.total_tokens_per_s},
          {"ttft_ms_p50", r.ttft_ms_p50},
          {"ttft_ms_p99", r.ttft_ms_p99},
          {"itl_ms_p50", r.itl_ms_p50},
          {"itl_ms_p99", r.itl_ms_p99},
          {"prefix_cache_hit_rate", r.prefix_cache_hit_rate},
          {"prefix_cache_hit_rate_turns_2plus", r.prefix_cache_hit_rate_later},
          {"hit_rate_by_turn", r.hit_rate_by_turn},
          {"preemptions", r.preemptions},
          {"steps", r.steps},
          {"spec_draft_tokens", r.spec_draft_tokens},
          {"spec_accepted_tokens", r.spec_accepted_tokens},
          {"host_restored_tokens", r.host_restored_tokens},
          {"host_saved_blocks", r.host_saved_blocks},
          {"host_loaded_blocks", r.host_loaded_blocks},
          {"host_unused_blocks", r.host_unused_blocks}};
}

}  // namespace beam::cli
