// `beamserve bench offline|step|kernels|serve` dispatch; offline (here) drives the engine with a synthetic workload and prints throughput,
// latency percentiles and prefix-cache hit rates (text, or one JSON object with --json).
#include <cstdio>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "cli/args.h"
#include "cli/bench_commands.h"
#include "cli/bench_common.h"
#include "cli/command_weights.h"
#include "cli/commands.h"
#include "cli/model_path.h"
#include "cli/data_parallel_flags.h"
#include "cli/hicache_flags.h"
#include "cli/speculative_flags.h"
#include "cli/usage.h"
#include "runtime/bench/offline_bench.h"

namespace beam::cli {
namespace {

Expected<WorkloadOptions> workload_from_args(const Args& a) {
  WorkloadOptions o;
  BEAM_ASSIGN_OR_RETURN(o.workload, parse_workload(a.get_or("workload", "uniform")));
  BEAM_ASSIGN_OR_RETURN(o.requests, a.get_int("requests", o.requests));
  BEAM_ASSIGN_OR_RETURN(o.prompt_len, a.get_int("prompt-len", o.prompt_len));
  BEAM_ASSIGN_OR_RETURN(o.shared_prefix_len, a.get_int("shared-prefix-len", o.shared_prefix_len));
  BEAM_ASSIGN_OR_RETURN(o.output_len, a.get_int("output-len", o.output_len));
  BEAM_ASSIGN_OR_RETURN(o.conversations, a.get_int("conversations", o.conversations));
  BEAM_ASSIGN_OR_RETURN(o.turns, a.get_int("turns", o.turns));
  BEAM_ASSIGN_OR_RETURN(o.first_prompt_len, a.get_int("first-prompt-len", o.first_prompt_len));
  BEAM_ASSIGN_OR_RETURN(o.turn_append_len, a.get_int("turn-append-len", o.turn_append_len));
  BEAM_ASSIGN_OR_RETURN(o.one_off_per_turn, a.get_int("one-off-per-turn", 0));
  if (o.one_off_per_turn < 0 || o.one_off_per_turn > 1000)
    return make_error("--one-off-per-turn must be in [0, 1000], got " +
                      std::to_string(o.one_off_per_turn));
  BEAM_ASSIGN_OR_RETURN(int64_t seed, a.get_int("seed", 1));
  o.seed = static_cast<uint64_t>(seed);
  for (int64_t v : {o.requests, o.prompt_len, o.output_len, o.conversations, o.turns, o.first_prompt_len})
    if (v <= 0) return make_error("workload sizes must be positive");
  return o;
}


int bench_offline(int argc, char** argv) {
  std::set<std::string> flags = {
      "model",      "workload",      "requests",       "prompt-len",       "shared-prefix-len",
      "output-len", "conversations", "turns",          "first-prompt-len", "turn-append-len",
      "one-off-per-turn",
      "seed",       "kv-budget-mb",  "block-size",     "max-step-tokens",  "max-running",
      "threads",    "device",        "no-cuda-graphs", "attention-probs",  "load-format",
      "enable-deterministic-inference"};
  flags.insert(std::begin(kSpeculativeFlags), std::end(kSpeculativeFlags));
  flags.insert(std::begin(kHierarchicalCacheFlags), std::end(kHierarchicalCacheFlags));
  flags.insert(std::begin(kDataParallelFlags), std::end(kDataParallelFlags));
  auto args = Args::parse(argc, argv, flags,
                          {"json", "no-prefix-cache", "enable-hierarchical-cache", "no-cuda-graphs",
                           "enable-deterministic-inference"});
  if (!args.ok()) return bench_fail(args.error().message);
  auto dir = resolve_model_dir(args->get("model"));
  if (!dir.ok()) return bench_fail(dir.error().message);
  auto wl = workload_from_args(*args);
  if (!wl.ok()) return bench_fail(wl.error().message);
  EngineOptions eo;
  auto kv_bytes = args->get_mebibytes("kv-budget-mb");  // absent: the engine's default
  auto bs = args->get_int_in("block-size", 64, 1, int64_t{1} << 16);
  // Absent: the engine's default for the device.
  auto step = args->get_int_in("max-step-tokens", 1, 1, int64_t{1} << 24);
  auto running = args->get_int_in("max-running", 64, 1, int64_t{1} << 20);
  auto threads = args->get_threads();
  for (const auto* e : {&bs, &step, &running})
    if (!e->ok()) return bench_fail(e->error().message);
  if (!kv_bytes.ok()) return bench_fail(kv_bytes.error().message);
  if (!threads.ok()) return bench_fail(threads.error().message);
  auto device = args->get_device();
  if (!device.ok()) return bench_fail(device.error().message);
  eo.kv_budget_bytes = *kv_bytes;
  eo.device = *device;
  eo.block_size_tokens = *bs;
  if (args->has("max-step-tokens")) eo.max_tokens_per_step = *step;
  eo.max_running = *running;
  eo.num_threads = *threads;
  eo.enable_prefix_cache = !args->has("no-prefix-cache");
  if (Status st = hierarchical_cache_from_args(*args, &eo); !st.ok()) return bench_fail(st.error().message);
  if (Status st = data_parallel_from_args(*args, &eo); !st.ok()) return bench_fail(st.error().message);
  eo.cuda_graphs = !args->has("no-cuda-graphs");
  eo.batch_invariance = args->get_batch_invariance();
  auto probs = args->get_attention_probs();
  if (!probs.ok()) return bench_fail(probs.error().message);
  eo.attention_probs = *probs;
  auto speculative = speculative_from_args(*args);
  if (!speculative.ok()) return bench_fail(speculative.error().message);
  eo.speculative = *speculative;
  auto weights = command_weights(*args, *dir, *device);
  if (!weights.ok()) return bench_fail(weights.error().message);
  auto engine = Engine::create(*weights, eo);
  if (!engine.ok()) return bench_fail(engine.error().message);
  BenchResult r = run_offline_bench(**engine, *wl);
  nlohmann::json j = bench_result_json(r);
  j["model"] = *dir;
  j["workload"] = args->get_or("workload", "uniform");
  j["max_tokens_per_step"] = (*engine)->max_tokens_per_step();
  j["deterministic_inference"] = batch_invariant(eo.device, eo.batch_invariance);
  j["data_parallel_size"] = eo.data_parallel_size;
  j["load_balance_method"] = load_balance_name(eo.load_balance);
  if (eo.enable_hierarchical_cache) {  // the host tier as it was sized
    const HostCacheStats h = (*engine)->stats().host_cache;
    j["host_tier"] = {{"bytes", h.bytes}, {"full_blocks", h.tier.capacity.full},
                      {"sliding_blocks", h.tier.capacity.sliding},
                      {"write_policy", host_write_policy_name(eo.hicache_write_policy)}};
  }
  if (eo.speculative.enabled()) {  // the drafts as the engine resolved them
    const bool dflash = !eo.speculative.dflash2_drafter.empty();
    j["speculative"] = {{"method", dflash ? "dflash2" : "ngram"},
                        {"num_draft_tokens", (*engine)->speculative_draft_tokens()},
                        {"draft_model", dflash ? nlohmann::json(eo.speculative.dflash2_drafter)
                                               : nlohmann::json(nullptr)}};
  }
  if (args->has("json")) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s\n", j.dump(2).c_str());
  }
  return r.failed == 0 ? 0 : 1;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  if (argc < 1) {
    std::fputs(kBenchUsage, stderr);
    return 1;
  }
  const std::string what = argv[0];
  struct Sub {
    const char* name;
    int (*run)(int, char**);
    const char* usage;
    bool slice;  // takes kBenchSliceFlags too
  };
  constexpr Sub kSubs[] = {{"offline", bench_offline, kBenchOfflineUsage, false},
                           {"step", bench_step, kBenchStepUsage, true},
                           {"kernels", bench_kernels, kBenchKernelsUsage, true},
                           {"serve", bench_serve, kBenchServeUsage, true}};
  if (what == "--help" || what == "-h") {
    std::fputs(kBenchUsage, stdout);
    return 0;
  }
  for (const Sub& sub : kSubs) {
    if (what != sub.name) continue;
    if (Args::wants_help(argc - 1, argv + 1)) {
      std::fputs(sub.usage, stdout);
      if (sub.slice) std::fputs(kBenchSliceFlags, stdout);
      return 0;
    }
    return sub.run(argc - 1, argv + 1);
  }
  return bench_fail("unknown benchmark '" + what + "' (available: offline, step, kernels, serve)");
}

}  // namespace beam::cli
