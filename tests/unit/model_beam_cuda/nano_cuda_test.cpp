// beam-nano on the GPU: greedy continuations of models/beam-nano/golden/greedy.json (which the CPU
// engine reproduces) through BeamModel directly and through a runtime Engine on Device::kCuda,
// alone and batched; the engine's step budget on the GPU; response formats (constrained decoding)
// through the device sampler; and the error an engine gives when CUDA is not available.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "../model_beam/beam_goldens.h"
#include "../runtime_engine/engine_test_util.h"
#include "../runtime_engine/structured_person.h"
#include "cuda_model_fixture.h"
#include "model/synthetic_weights.h"
#include "runtime/engine.h"
#include "runtime/engine_device.h"

namespace beam::testing {
namespace {

// Greedy decoding with BeamModel and a LocalKvCache on the model's device: argmax of each step's
// logits until a stop id (kept) or max_new tokens.
std::vector<int32_t> greedy_decode(BeamModel& model, const std::vector<int32_t>& prompt,
                                   int64_t max_new, const std::vector<int32_t>& stop_ids) {
  const int64_t capacity = static_cast<int64_t>(prompt.size()) + max_new;
  auto kv = LocalKvCache::create(model.context(), model.config(), 1, capacity);
  EXPECT_TRUE(kv.ok());
  if (!kv.ok()) return {};
  std::vector<int32_t> output, step = prompt;
  ForwardOutput out;
  while (static_cast<int64_t>(output.size()) < max_new) {
    ForwardBatch batch;
    const int64_t cached = static_cast<int64_t>(prompt.size() + output.size() - step.size());
    batch.seqs.push_back(SeqChunk{step, 0, cached, kv->block_table(0), kv->block_table(0), false});
    auto st = model.forward(batch, kv->layers(), out);
    EXPECT_TRUE(st.ok()) << st.error().message;
    if (!st.ok()) break;
    auto row = out.row(0);
    int32_t tok = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    output.push_back(tok);
    if (std::find(stop_ids.begin(), stop_ids.end(), tok) != stop_ids.end()) break;
    step = {tok};
  }
  return output;
}

// The reference's greedy tokens up to its first choice with a top-1/top-2 margin below 0.5 (issue
// 7's criterion, as the engine test below): the GPU's other summation orders move this model's
// logits by up to ~0.5 (the golden CLI's max |Δ|), so a closer call may go to the runner-up.
TEST_F(CudaModelTest, NanoGreedyMatchesReferenceOnTheGpu) {
  GreedyGoldens golden = load_greedy_goldens("beam-nano");
  ASSERT_EQ(golden.cases.size(), 5u);
  auto model = gpu_model("beam-nano");
  ASSERT_NE(model, nullptr);
  auto reference = cpu_model("beam-nano");
  ASSERT_NE(reference, nullptr);
  for (size_t i = 0; i < golden.cases.size(); ++i) {
    const GreedyCase& c = golden.cases[i];
    const std::vector<int32_t> got =
        greedy_decode(*model, c.prompt_ids, golden.max_new_tokens, golden.stop_token_ids);
    const int64_t k = confident_prefix(*reference, c.prompt_ids, c.generated_ids);
    EXPECT_EQ(first(got, k), first(c.generated_ids, k)) << "case " << i << ": " << c.prompt;
    std::printf("case %zu: %lld of %zu tokens chosen with margin >= 0.5; the GPU's tokens %s\n", i,
                static_cast<long long>(k), c.generated_ids.size(),
                got == c.generated_ids ? "all equal" : "part from the reference after them");
  }
}

TEST_F(CudaModelTest, EngineOnCudaGeneratesTheCpuEnginesGreedyTokens) {
  GreedyGoldens golden = load_greedy_goldens("beam-nano");
  ASSERT_EQ(golden.cases.size(), 5u);
  auto weights = engine_test_model("beam-nano");
  ASSERT_NE(weights, nullptr);
  auto cpu = Engine::create(weights, engine_options(Device::kCpu));
  ASSERT_TRUE(cpu.ok()) << cpu.error().message;
  auto gpu = Engine::create(weights, engine_options(Device::kCuda));
  ASSERT_TRUE(gpu.ok()) << gpu.error().message;
  const auto reqs = greedy_requests(golden);
  auto cpu_batched = run_all(**cpu, reqs);
  auto gpu_batched = run_all(**gpu, reqs);
  auto reference = cpu_model("beam-nano");
  ASSERT_NE(reference, nullptr);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const std::vector<int32_t>& want = cpu_batched[i][0].tokens;
    EXPECT_EQ(want, golden.cases[i].generated_ids) << "case " << i << ": the CPU engine vs the reference";
    // Tokens chosen with a margin >= 0.5 must agree; after the first closer call the GPU's other
    // summation order (and batch shape) may pick the runner-up.
    const int64_t k = confident_prefix(*reference, reqs[i].prompt, want);
    auto gpu_alone = run_all(**gpu, {reqs[i]})[0][0];
    EXPECT_EQ(first(gpu_alone.tokens, k), first(want, k)) << "case " << i << " alone on the GPU";
    EXPECT_EQ(first(gpu_batched[i][0].tokens, k), first(want, k)) << "case " << i << " batched on the GPU";
    std::printf("case %zu: %lld of %zu tokens chosen with margin >= 0.5; GPU alone %s, batched %s beyond\n", i,
                static_cast<long long>(k), want.size(), gpu_alone.tokens == want ? "equal" : "differs",
                gpu_batched[i][0].tokens == want ? "equal" : "differs");
  }
  expect_pools_full(**gpu);
}

// Constrained decoding on the GPU engine: the token masks reach the device sampler, so greedy and
// sampled (n > 1, several sharing the prompt owner's logits row) outputs of beam-nano, alone and
// batched, satisfy the constraint `make` builds (`check` each finished sibling).
using MakeConstraint = std::shared_ptr<const OutputConstraint> (*)(const text::Tokenizer&,
                                                                   int64_t vocab_size);
using CheckOutput = void (*)(const text::Tokenizer&, const std::vector<int32_t>&,
                             std::optional<FinishReason>);
void expect_constrained_on_cuda(const std::string& prompt, MakeConstraint make, CheckOutput check) {
  auto tok = text::Tokenizer::load(std::string(BEAMSERVE_SOURCE_DIR) + "/models/beam-nano");
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  auto weights = engine_test_model("beam-nano");
  ASSERT_NE(weights, nullptr);
  auto gpu = Engine::create(weights, engine_options(Device::kCuda));
  ASSERT_TRUE(gpu.ok()) << gpu.error().message;
  const auto constraint = make(*tok, weights->config.vocab_size);
  std::vector<RunRequest> reqs;
  for (int i = 0; i < 4; ++i) {
    auto ids = tok->encode(prompt + std::to_string(i) + " = ", /*allow_special=*/false);
    ASSERT_TRUE(ids.ok());
    RunRequest r;
    r.prompt.assign(ids->begin(), ids->end());
    r.params.temperature = i % 2 ? 0.9 : 0;
    r.params.seed = 11;
    r.params.n = i % 2 ? 3 : 1;
    r.params.max_tokens = 400;
    r.params.constraint = constraint;
    reqs.push_back(r);
  }
  auto batched = run_all(**gpu, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    for (const SiblingResult& s : batched[i]) check(*tok, s.tokens, s.finish);
    const auto alone = run_all(**gpu, {reqs[i]});  // (a range-for over [0] of it would dangle)
    for (const SiblingResult& s : alone[0]) check(*tok, s.tokens, s.finish);
  }
  expect_pools_full(**gpu);
}

// A JSON schema: outputs are JSON of it ending with an end token.
TEST_F(CudaModelTest, EngineOnCudaKeepsResponseFormats) {
  expect_constrained_on_cuda("person_", person_constraint, expect_person);
}

// A GBNF grammar (recursive): outputs are whole matches of it.
TEST_F(CudaModelTest, EngineOnCudaKeepsGrammars) {
  expect_constrained_on_cuda("lists_", nested_lists_constraint, expect_nested_lists);
}

// A reasoning budget: its end tokens reach the device sampler as the only allowed tokens.
TEST_F(CudaModelTest, EngineOnCudaForcesTheEndOfAReasoningBudget) {
  auto weights = engine_test_model("beam-nano");
  ASSERT_NE(weights, nullptr);
  auto gpu = Engine::create(weights, engine_options(Device::kCuda));
  ASSERT_TRUE(gpu.ok()) << gpu.error().message;
  const ReasoningBudget budget = test_reasoning_budget(8);
  const auto results =
      run_all(**gpu, reasoning_budget_requests(budget, weights->config.vocab_size));
  for (const auto& request : results)
    for (const SiblingResult& s : request) expect_reasoning_budget_kept(s.tokens, budget);
  expect_pools_full(**gpu);
}

// Engine::update_weights on CUDA: the new weights are copied over the device arena in place and
// the experts packed again, so an engine that started on beam-nano and took other weights of its
// architecture (decode graphs captured before the update) gives exactly the tokens of an engine
// created on those weights; a request in flight finishes on the weights it started with.
TEST_F(CudaModelTest, EngineOnCudaServesUpdatedWeightsInPlace) {
  auto nano = engine_test_model("beam-nano");
  ASSERT_NE(nano, nullptr);
  auto other = make_synthetic_weights(cpu_, nano->config, SyntheticWeightOptions{.seed = 5});
  ASSERT_TRUE(other.ok()) << other.error().message;
  std::shared_ptr<const BeamWeights> updated = *other;
  auto engine = Engine::create(nano, engine_options(Device::kCuda));
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  auto fresh = Engine::create(updated, engine_options(Device::kCuda));
  ASSERT_TRUE(fresh.ok()) << fresh.error().message;
  auto fresh_nano = Engine::create(nano, engine_options(Device::kCuda));
  ASSERT_TRUE(fresh_nano.ok()) << fresh_nano.error().message;
  const std::vector<RunRequest> reqs = {
      {tokens_of(37, 1, nano->config.vocab_size), greedy(24)},
      {tokens_of(70, 2, nano->config.vocab_size), greedy(24)}};
  const auto old_tokens = run_all(**engine, reqs);  // captures decode graphs on nano's weights
  ASSERT_TRUE((*engine)->update_weights(updated, /*abort_in_flight=*/false).ok());
  const auto got = run_all(**engine, reqs);
  const auto want = run_all(**fresh, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(got[i][0].tokens, want[i][0].tokens) << "request " << i;
    EXPECT_NE(got[i][0].tokens, old_tokens[i][0].tokens) << "request " << i;
  }
  ASSERT_TRUE((*engine)->update_weights(nano, false).ok());
  const auto back = run_all(**engine, reqs);
  const auto nano_tokens = run_all(**fresh_nano, reqs);
  for (size_t i = 0; i < reqs.size(); ++i)
    EXPECT_EQ(back[i][0].tokens, nano_tokens[i][0].tokens) << "request " << i;
  expect_pools_full(**engine);
}

// With no step budget given the engine takes the device's default (8192 tokens on an H200), runs
// one step of that size before it sizes the KV pools (warm_up_largest_step), and then serves a
// prompt longer than the CPU engine's 2,048-token chunks in one chunk with the CPU engine's
// confident greedy tokens.
TEST_F(CudaModelTest, EngineOnCudaTakesTheDevicesStepBudgetAfterWarmingItUp) {
  auto weights = engine_test_model("beam-nano");
  ASSERT_NE(weights, nullptr);
  EngineOptions o = engine_options(Device::kCuda);
  o.max_tokens_per_step.reset();
  o.kv_budget_bytes.reset();  // the budget measured after the warm-up step
  auto gpu = Engine::create(weights, o);
  ASSERT_TRUE(gpu.ok()) << gpu.error().message;
  const int64_t want_step =
      default_max_tokens_per_step(Device::kCuda, device_memory_info(gpu_).total_bytes);
  EXPECT_EQ((*gpu)->max_tokens_per_step(), want_step);
  EngineOptions co = engine_options(Device::kCpu);
  co.max_tokens_per_step.reset();
  auto cpu = Engine::create(weights, co);
  ASSERT_TRUE(cpu.ok()) << cpu.error().message;
  EXPECT_EQ((*cpu)->max_tokens_per_step(), 2048);
  std::mt19937_64 rng(11);
  RunRequest r;
  r.prompt.resize(3000);
  for (int32_t& t : r.prompt) t = static_cast<int32_t>(rng() % weights->config.vocab_size);
  r.params.temperature = 0;
  r.params.max_tokens = 12;
  r.params.ignore_eos = true;
  const std::vector<int32_t> want = run_all(**cpu, {r})[0][0].tokens;
  const std::vector<int32_t> got = run_all(**gpu, {r})[0][0].tokens;
  ASSERT_EQ(want.size(), 12u);
  auto reference = cpu_model("beam-nano");
  ASSERT_NE(reference, nullptr);
  const int64_t k = confident_prefix(*reference, r.prompt, want);
  EXPECT_EQ(first(got, k), first(want, k));
  std::printf("step budget %lld; %lld of 12 tokens chosen with margin >= 0.5; the GPU's %s\n",
              static_cast<long long>(want_step), static_cast<long long>(k),
              got == want ? "all equal" : "differ beyond");
  expect_pools_full(**gpu);
  // A budget below max_running: the warm-up step is one token a sequence (run eagerly), and the
  // prompt prefills in 8-token chunks.
  EngineOptions small = engine_options(Device::kCuda);
  small.max_tokens_per_step = 8;
  auto chunked = Engine::create(weights, small);
  ASSERT_TRUE(chunked.ok()) << chunked.error().message;
  EXPECT_EQ((*chunked)->max_tokens_per_step(), 8);
  const std::vector<int32_t> got8 = run_all(**chunked, {r})[0][0].tokens;
  EXPECT_EQ(first(got8, k), first(want, k));
  expect_pools_full(**chunked);
}

// Without a usable GPU, an engine on Device::kCuda fails with the reason create_cuda_context gives
// (no backend built, no device). Skips where a GPU is present (tools/gpu/run_tests.sh expects
// suites named NoGpu* to skip there).
TEST(NoGpu, EngineReportsWhyCudaCannotBeUsed) {
  auto probe = create_cuda_context(0);
  if (probe.ok()) GTEST_SKIP() << "a GPU is available";
  auto weights = engine_test_model("tiny-beam");
  ASSERT_NE(weights, nullptr);
  auto engine = Engine::create(weights, engine_options(Device::kCuda));
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.error().message, probe.error().message);
}

}  // namespace
}  // namespace beam::testing
