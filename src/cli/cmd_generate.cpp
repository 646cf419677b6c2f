// `beamserve generate`: prefill a prompt and decode on the CPU or GPU 0 (sampling on the host),
// printing the generated text (or ids) and prefill/decode throughput.
#include <chrono>
#include <cstdio>
#include <optional>
#include <utility>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/generate_constraint.h"
#include "cli/model_path.h"
#include "cli/usage.h"
#include "core/thread_pool.h"
#include "model/beam/beam_model.h"
#include "model/beam/local_kv_cache.h"
#include "cli/command_weights.h"
#include "runtime/engine_device.h"
#include "runtime/sampling/finish_check.h"
#include "runtime/sampling/sampler.h"
#include "runtime/sampling/sampling_rng.h"
#include "runtime/sampling/sequence_sampling_state.h"
#include "text/tokenizer.h"

namespace beam::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kDefaultPrompt = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n";

int generate_fail(const std::string& m) {
  std::fprintf(stderr, "generate: %s\n", m.c_str());
  return 1;
}

Expected<SamplingParams> sampling_from_args(const Args& a) {
  SamplingParams p;
  BEAM_ASSIGN_OR_RETURN(p.temperature, a.get_double("temperature", 0.0));
  BEAM_ASSIGN_OR_RETURN(p.top_p, a.get_double("top-p", 1.0));
  BEAM_ASSIGN_OR_RETURN(p.top_k, a.get_int("top-k", 0));
  BEAM_ASSIGN_OR_RETURN(p.min_p, a.get_double("min-p", 0.0));
  BEAM_ASSIGN_OR_RETURN(int64_t max_tokens, a.get_int("max-tokens", 64));
  p.max_tokens = max_tokens;
  if (a.has("seed")) {
    BEAM_ASSIGN_OR_RETURN(int64_t seed, a.get_int("seed", 0));
    p.seed = static_cast<uint64_t>(seed);
  }
  return p;
}

}  // namespace

int cmd_generate(int argc, char** argv) {
  auto args =
      Args::parse(argc, argv,
                  {"model", "tokens", "prompt", "max-tokens", "temperature", "top-p", "top-k",
                   "min-p", "seed", "threads", "device", "no-cuda-graphs", "attention-probs", "load-format",
                   "grammar", "grammar-file", "json-schema", "json-schema-file", "regex",
                   "enable-deterministic-inference"},
                  {"no-cuda-graphs", "enable-deterministic-inference"});
  if (!args.ok()) {
    std::fprintf(stderr, "generate: %s\n%s", args.error().message.c_str(), kGenerateUsage);
    return 2;
  }
  auto dir = resolve_model_dir(args->get("model"));
  if (!dir.ok()) return generate_fail(dir.error().message);
  auto params = sampling_from_args(*args);
  if (!params.ok()) return generate_fail(params.error().message);
  auto device = args->get_device();
  if (!device.ok()) return generate_fail(device.error().message);
  // A text prompt or a constraint needs the model's tokenizer; without --tokens or --prompt a
  // default prompt is used so that `beamserve generate` runs with no arguments.
  std::optional<text::Tokenizer> tokenizer;
  if (!args->has("tokens") || has_constraint_flag(*args)) {
    auto tok = text::Tokenizer::load(*dir);
    if (!tok.ok()) return generate_fail(tok.error().message);
    tokenizer.emplace(std::move(*tok));
  }
  std::vector<int32_t> prompt;
  if (args->has("tokens")) {
    auto ids = Args::parse_int_list("tokens", *args->get("tokens"));
    if (!ids.ok()) return generate_fail(ids.error().message);
    prompt.assign(ids->begin(), ids->end());
  } else {
    const std::string text = args->get_or("prompt", kDefaultPrompt);
    auto ids = tokenizer->encode(text, /*allow_special=*/false);
    if (!ids.ok()) return generate_fail(ids.error().message);
    if (ids->empty()) return generate_fail("--prompt: the prompt encodes to no tokens");
    prompt.assign(ids->begin(), ids->end());
    if (!args->has("prompt")) std::fprintf(stderr, "prompt (default): %s", text.c_str());
  }
  auto threads = args->get_threads();
  if (!threads.ok()) return generate_fail(threads.error().message);
  if (tokenizer) {  // checked before the weights load
    auto config = load_beam_config(*dir);
    if (!config.ok()) return generate_fail(config.error().message);
    auto constraint = generate_constraint(*args, *tokenizer, config->vocab_size);
    if (!constraint.ok()) return generate_fail(constraint.error().message);
    params->constraint = *constraint;
  }

  auto weights = command_weights(*args, *dir, *device);
  if (!weights.ok()) return generate_fail(weights.error().message);
  auto dev = open_engine_device(*device, std::move(*weights));  // host copy dropped on CUDA
  if (!dev.ok()) return generate_fail(dev.error().message);
  dev->cuda_graphs = !args->has("no-cuda-graphs");
  auto probs = args->get_attention_probs();
  if (!probs.ok()) return generate_fail(probs.error().message);
  dev->attention_probs = *probs;
  dev->batch_invariance = args->get_batch_invariance();
  const BeamConfig& cfg = dev->weights->config;
  auto sp = std::make_shared<const SamplingParams>(*params);
  std::vector<int32_t> eos(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end());
  SequenceSamplingSetup setup{sp, sp->seed.value_or(draw_random_seed()), 0, prompt, eos,
                              cfg.vocab_size, cfg.max_position_embeddings};
  auto state = SequenceSamplingState::create(setup);
  if (!state.ok()) return generate_fail(state.error().message);

  ThreadPool pool(static_cast<int>(*threads));
  BeamModel model(dev->weights, dev->context(&pool));
  const int64_t capacity = static_cast<int64_t>(prompt.size()) + state->output_limit_tokens();
  auto kv = LocalKvCache::create(model.context(), cfg, 1, capacity);
  if (!kv.ok()) return generate_fail(kv.error().message);
  Sampler sampler(cfg.vocab_size);
  std::vector<uint32_t> allowed(static_cast<size_t>(allowed_mask_words(cfg.vocab_size)));
  MaskScratch mask_scratch;
  std::vector<int32_t> output;
  ForwardOutput out;
  std::vector<int32_t> step_tokens = prompt;
  auto t0 = Clock::now();
  double prefill_s = 0;
  for (;;) {
    ForwardBatch batch;
    int64_t cached = static_cast<int64_t>(prompt.size() + output.size() - step_tokens.size());
    batch.seqs.push_back(SeqChunk{step_tokens, 0, cached, kv->block_table(0), kv->block_table(0), false});
    batch.seqs.back().num_prompt = static_cast<int64_t>(prompt.size());
    if (auto st = model.forward(batch, kv->layers(), out); !st.ok())
      return generate_fail(st.error().message);
    if (output.empty()) prefill_s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::span<const uint32_t> mask;  // empty: every token
    if (state->constrained()) {
      if (Status st = state->fill_allowed_tokens(allowed, mask_scratch); !st.ok())
        return generate_fail(st.error().message);
      mask = allowed;
    }
    SampledToken tok = sampler.sample(SampleRow{out.row(0), &*state, {}, mask});
    std::vector<int32_t> step = {tok.token};
    StepFinish fin = check_finish(*state, step);
    state->append_output(step);
    output.push_back(tok.token);
    if (fin.cause) break;
    step_tokens = step;
  }
  double total_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (tokenizer) {
    auto text = tokenizer->decode(output, /*skip_special=*/true);
    if (!text.ok()) return generate_fail(text.error().message);
    std::printf("%s\n", text->c_str());
  } else {
    for (size_t i = 0; i < output.size(); ++i) std::printf("%s%d", i ? "," : "", output[i]);
    std::printf("\n");
  }
  double decode_s = total_s - prefill_s;
  std::fprintf(stderr, "prefill: %zu tokens in %.3f s (%.1f tokens/s); decode: %zu tokens in %.3f s (%.1f tokens/s)\n",
               prompt.size(), prefill_s, prompt.size() / prefill_s, output.size() - 1, decode_s,
               output.size() > 1 ? (output.size() - 1) / decode_s : 0.0);
  return 0;
}

}  // namespace beam::cli
