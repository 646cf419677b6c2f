// `beamserve bench serve`: the offline engine benchmark (runtime/bench/offline_bench.h) on
// beam-slice, a uniform token-id workload at several concurrencies. The engine uploads host
// weights, so the random weights are generated in host memory (default 2 layers: ~24 GB).
// --json-schema FILE --tokenizer DIR constrains every output to JSON of the schema (structured
// output, with DIR's tokenizer as the vocabulary's text).
#include <algorithm>
#include <cstdio>
#include <fstream>

#include "cli/bench_commands.h"
#include "cli/bench_common.h"
#include "cli/data_parallel_flags.h"
#include "cli/speculative_flags.h"
#include "runtime/bench/offline_bench.h"
#include "runtime/structured/output_constraint.h"
#include "server/api/response_format.h"

namespace beam::cli {
namespace {

nlohmann::json offline_json(const BenchResult& r, int64_t concurrency) {
  nlohmann::json j = bench_result_json(r);
  j["concurrency"] = concurrency;
  return j;
}

// The constraint of --json-schema FILE over --tokenizer DIR's text tokens.
Expected<std::shared_ptr<const OutputConstraint>> schema_constraint(const Args& args,
                                                                    int64_t vocab_size) {
  const std::string schema_path = args.get_or("json-schema", "");
  if (!args.has("tokenizer")) return make_error("--json-schema needs --tokenizer DIR");
  std::ifstream in(schema_path);
  if (!in) return make_error("--json-schema: cannot read " + schema_path);
  auto schema = nlohmann::ordered_json::parse(in, nullptr, false);
  if (schema.is_discarded()) return make_error("--json-schema: " + schema_path + " is not JSON");
  BEAM_ASSIGN_OR_RETURN(auto grammar, JsonGrammar::from_schema(schema));
  BEAM_ASSIGN_OR_RETURN(text::Tokenizer tok, text::Tokenizer::load(args.get_or("tokenizer", "")));
  auto c = std::make_shared<OutputConstraint>();
  c->grammar = std::move(grammar);
  c->vocab = server::build_structured_vocab(tok, vocab_size);
  c->hidden_tokens = server::hidden_special_tokens(tok, /*skip_special=*/true, {});
  return std::shared_ptr<const OutputConstraint>(std::move(c));
}

}  // namespace

int bench_serve(int argc, char** argv) {
  auto flags = bench_common_flags();
  flags.insert({"concurrency", "prompt-len", "output-len", "kv-budget-mb", "max-step-tokens",
                "seed", "json-schema", "tokenizer", "tensor-parallel-size"});
  flags.insert(std::begin(kDataParallelFlags), std::end(kDataParallelFlags));
  flags.insert(std::begin(kSpeculativeFlags), std::end(kSpeculativeFlags));
  auto args = Args::parse(argc, argv, flags, bench_common_bool_flags());
  if (!args.ok()) return bench_fail(args.error().message);
  auto levels = Args::parse_int_list("concurrency", args->get_or("concurrency", "1,8,32"));
  auto prompt = args->get_int("prompt-len", 512);
  auto output = args->get_int("output-len", 128);
  auto kv_bytes = args->get_mebibytes("kv-budget-mb");
  // Absent: the engine's default for the device.
  auto step = args->get_int_in("max-step-tokens", 1, 1, int64_t{1} << 24);
  auto seed = args->get_int("seed", 1);             // the prompts' token ids
  auto tp = args->get_int("tensor-parallel-size", 1);  // GPUs 0..N-1 (EngineOptions)
  for (const auto* e : {&prompt, &output, &step, &seed, &tp})
    if (!e->ok()) return bench_fail(e->error().message);
  if (!kv_bytes.ok()) return bench_fail(kv_bytes.error().message);
  if (!levels.ok()) return bench_fail(levels.error().message);
  auto device = args->get_device();
  if (!device.ok()) return bench_fail(device.error().message);
  auto config = slice_config_from_args(*args, 2);
  if (!config.ok()) return bench_fail(config.error().message);
  // The device is opened only to name it in the report (before the engine sizes its KV pools).
  auto dev = open_bench_device(*args);
  if (!dev.ok()) return bench_fail(dev.error().message);
  // Host weights for the engine (it copies them to the device); the fill runs on the CPU pool.
  KernelContext host;
  host.pool = (*dev)->pool.get();
  auto threads = args->get_threads();
  if (!threads.ok()) return bench_fail(threads.error().message);
  auto weights = synthetic_weights_from_args(*args, host, *config);
  if (!weights.ok()) return bench_fail(weights.error().message);
  EngineOptions eo;
  eo.device = *device;
  eo.max_running = *std::max_element(levels->begin(), levels->end());
  if (args->has("max-step-tokens")) eo.max_tokens_per_step = *step;
  eo.cuda_graphs = !args->has("no-cuda-graphs");
  eo.batch_invariance = args->get_batch_invariance();
  eo.attention_probs = (*dev)->ctx.attention_probs;
  eo.num_threads = *threads;
  eo.kv_budget_bytes = *kv_bytes;
  eo.tensor_parallel_size = static_cast<int>(*tp);
  if (Status st = data_parallel_from_args(*args, &eo); !st.ok()) return bench_fail(st.error().message);
  auto speculative = speculative_from_args(*args);
  if (!speculative.ok()) return bench_fail(speculative.error().message);
  eo.speculative = *speculative;
  std::shared_ptr<const OutputConstraint> constraint;
  if (args->has("json-schema")) {
    auto c = schema_constraint(*args, config->vocab_size);
    if (!c.ok()) return bench_fail(c.error().message);
    constraint = *c;
  }
  auto engine = Engine::create(std::move(*weights), eo);
  if (!engine.ok()) return bench_fail(engine.error().message);
  nlohmann::json runs = nlohmann::json::array();
  // Every level and the warm-up draw prompts of their own (seed + level index; the warm-up after
  // the levels), so no level prefills a prompt another one left in the prefix cache.
  const auto base_seed = static_cast<uint64_t>(*seed);
  WorkloadOptions warm;  // first-use costs (decode graphs, allocations) stay out of the figures
  warm.requests = 1;
  warm.prompt_len = std::min<int64_t>(*prompt, 8192);  // the engine warmed up its largest step
  warm.output_len = 4;
  warm.seed = base_seed + levels->size();
  int64_t failed = run_offline_bench(**engine, warm).failed;
  for (size_t i = 0; i < levels->size(); ++i) {
    const int64_t c = (*levels)[i];
    if (c < 1) return bench_fail("--concurrency values must be >= 1");
    WorkloadOptions w;
    w.workload = Workload::kUniform;
    w.requests = c;  // all submitted at once: c sequences decode together
    w.prompt_len = *prompt;
    w.output_len = *output;
    w.seed = base_seed + i;
    w.constraint = constraint;
    BenchResult r = run_offline_bench(**engine, w);
    failed += r.failed;
    runs.push_back(offline_json(r, c));
  }
  nlohmann::json report =
      report_header("serve", *args, (*dev)->ctx, *config, command_line("serve", argc, argv));
  report["workload"] =
      constraint
          ? "uniform token ids (each level's own prompts, seed + level index), greedy, every "
            "output constrained to JSON of --json-schema (it may end before --output-len)"
          : "uniform token ids (no tokenizer; each level's own prompts, seed + level index), "
            "greedy, ignore_eos";
  if (constraint) report["json_schema"] = args->get_or("json-schema", "");
  report["max_tokens_per_step"] = (*engine)->max_tokens_per_step();
  report["tensor_parallel_size"] = *tp;
  report["data_parallel_size"] = eo.data_parallel_size;
  report["load_balance_method"] = load_balance_name(eo.load_balance);
  report["runs"] = runs;
  const int rc = emit_report(report, *args);
  return failed == 0 ? rc : 1;
}

}  // namespace beam::cli
