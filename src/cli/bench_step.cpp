// `beamserve bench step`: decode and prefill steps of beam-slice through BeamModel, per-layer
// times against their roofline floors (runtime/bench/step_bench.h); --breakdown adds ms per op kind.
#include <cstdio>
#include <string>

#include "cli/bench_commands.h"
#include "cli/bench_common.h"
#include "runtime/bench/step_bench.h"
#include "runtime/speculative/ngram_proposer.h"

namespace beam::cli {
namespace {

Expected<StepBenchOptions> step_options(const Args& a) {
  StepBenchOptions o;
  if (auto b = a.get("batches")) {
    BEAM_ASSIGN_OR_RETURN(o.batches, Args::parse_int_list("batches", *b));
  }
  BEAM_ASSIGN_OR_RETURN(o.context, a.get_int("context", o.context));
  BEAM_ASSIGN_OR_RETURN(o.warmup_steps, a.get_int("warmup", o.warmup_steps));
  BEAM_ASSIGN_OR_RETURN(o.timed_steps, a.get_int("steps", o.timed_steps));
  BEAM_ASSIGN_OR_RETURN(o.prefill_tokens, a.get_int("prefill-tokens", o.prefill_tokens));
  BEAM_ASSIGN_OR_RETURN(o.prefill_reps, a.get_int("prefill-reps", o.prefill_reps));
  BEAM_ASSIGN_OR_RETURN(o.prefill_chunk, a.get_int("prefill-chunk", o.prefill_chunk));
  BEAM_ASSIGN_OR_RETURN(o.block_size, a.get_int("block-size", o.block_size));
  BEAM_ASSIGN_OR_RETURN(int64_t seed, a.get_int("seed", 1));
  o.seed = static_cast<uint64_t>(seed);
  o.breakdown = a.has("breakdown");
  BEAM_ASSIGN_OR_RETURN(o.breakdown_steps, a.get_int("breakdown-steps", o.breakdown_steps));
  BEAM_ASSIGN_OR_RETURN(int64_t lora_slots, a.get_int("lora-slots", o.lora_slots));
  BEAM_ASSIGN_OR_RETURN(int64_t lora_rank, a.get_int("lora-rank", o.lora_rank));
  if (lora_slots < 0 || lora_slots > 64 || lora_rank < 1 || lora_rank > 512)
    return make_error("bench step: --lora-slots must be in [0, 64] and --lora-rank in [1, 512]");
  o.lora_slots = static_cast<int>(lora_slots);
  o.lora_rank = static_cast<int>(lora_rank);
  o.lora_experts = a.has("lora-experts");
  BEAM_ASSIGN_OR_RETURN(o.draft_tokens, a.get_int("draft-tokens", 0));
  if (o.draft_tokens < 0 || o.draft_tokens > kMaxDraftTokens)
    return make_error("bench step: --draft-tokens must be in [0, " +
                      std::to_string(kMaxDraftTokens) + "]");
  return o;
}

// The per-op table of each decode batch that has a "breakdown" (stderr; the JSON has it all).
void print_breakdown(const nlohmann::json& result) {
  for (const nlohmann::json& d : result["decode"]) {
    if (!d.contains("breakdown")) continue;
    const nlohmann::json& b = d["breakdown"];
    std::fprintf(stderr,
                 "breakdown, batch %lld: eager step %.4f ms (profiled %.4f ms), layers %.4f ms "
                 "per layer\n  %-14s %10s %14s %6s\n",
                 static_cast<long long>(d["batch"].get<int64_t>()),
                 b["eager_step_ms"].get<double>(), b["profiled_step_ms"].get<double>(),
                 b["layers_ms_per_layer"].get<double>(), "op", "ms", "ms/layer", "calls");
    for (const auto& [name, op] : b["ops"].items())
      std::fprintf(stderr, "  %-14s %10.4f %14.4f %6lld\n", name.c_str(), op["ms"].get<double>(),
                   op["ms_per_layer"].get<double>(),
                   static_cast<long long>(op["calls"].get<int64_t>()));
  }
}

// Per batch: the step time and the host time it waits for (the CUDA-graph CPU overhead).
void print_host_overhead(const nlohmann::json& result) {
  for (const nlohmann::json& d : result["decode"])
    std::fprintf(stderr, "decode batch %lld: step %.4f ms, host enqueue %.4f ms (%.1f%% of the step, "
                 "cuda graphs %s)\n",
                 static_cast<long long>(d["batch"].get<int64_t>()), d["decode_step_ms"].get<double>(),
                 d["host_enqueue_ms"].get<double>(), 100.0 * d["host_overhead_fraction"].get<double>(),
                 d["cuda_graphs"].get<bool>() ? "on" : "off");
}

}  // namespace

int bench_step(int argc, char** argv) {
  auto flags = bench_common_flags();
  flags.insert({"batches", "context", "warmup", "steps", "prefill-tokens", "prefill-reps",
                "prefill-chunk", "block-size", "seed", "breakdown-steps", "lora-slots",
                "draft-tokens", "lora-rank"});
  auto bool_flags = bench_common_bool_flags();
  bool_flags.insert({"breakdown", "lora-experts"});
  auto args = Args::parse(argc, argv, flags, bool_flags);
  if (!args.ok()) return bench_fail(args.error().message);
  auto opts = step_options(*args);
  if (!opts.ok()) return bench_fail(opts.error().message);
  auto config = slice_config_from_args(*args, 6);
  if (!config.ok()) return bench_fail(config.error().message);
  auto dev = open_bench_device(*args);
  if (!dev.ok()) return bench_fail(dev.error().message);
  const KernelContext& ctx = (*dev)->ctx;
  auto weights = synthetic_weights_from_args(*args, ctx, *config);
  if (!weights.ok()) return bench_fail(weights.error().message);
  auto result = run_step_bench(ctx, *weights, *opts);
  if (!result.ok()) return bench_fail(result.error().message);
  nlohmann::json report =
      report_header("step", *args, ctx, *config, command_line("step", argc, argv));
  report.update(*result);
  print_host_overhead(*result);
  print_breakdown(*result);
  return emit_report(report, *args);
}

}  // namespace beam::cli
