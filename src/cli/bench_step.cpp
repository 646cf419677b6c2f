// `beamserve bench step`: decode and prefill steps of beam-slice through BeamModel, per-layer
// times against their roofline floors (runtime/bench/step_bench.h).
#include <cstdio>

#include "cli/bench_commands.h"
#include "cli/bench_common.h"
#include "runtime/bench/step_bench.h"

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
  return o;
}

}  // namespace

int bench_step(int argc, char** argv) {
  auto flags = bench_common_flags();
  flags.insert({"batches", "context", "warmup", "steps", "prefill-tokens", "prefill-reps",
                "prefill-chunk", "block-size", "seed"});
  auto args = Args::parse(argc, argv, flags, bench_common_bool_flags());
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
  return emit_report(report, *args);
}

}  // namespace beam::cli
