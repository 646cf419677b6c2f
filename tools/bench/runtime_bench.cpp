// The engine's host-side work per step (Google Benchmark): n-gram draft proposal
// (propose_ngram_drafts) over a sequence of N tokens whose last token never occurred before (a
// full scan: the worst case, paid by every speculating sequence each step) and over one that
// repeats a 64-token period (a match at once); the DFlash2 drafter on the host
// (models/tiny-beam-dflash2 for models/tiny-beam): one block for each of S decodes over a full
// window of context, and the context K/V of T new tokens.
// Run from the repository root: build/<dir>/tools/bench/runtime_bench
#include <benchmark/benchmark.h>

#include <optional>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/bf16.h"
#include "model/dflash2/dflash2_drafter.h"
#include "model/weights.h"
#include "runtime/speculative/ngram_proposer.h"

namespace beam {
namespace {

std::vector<int32_t> random_tokens(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % 151936);  // Beam's vocabulary
  return t;
}

void run(benchmark::State& state, const std::vector<int32_t>& tokens) {
  const Speculation config{.num_draft_tokens = 4, .min_match = 1, .max_match = 4};
  std::vector<int32_t> out(4);
  for (auto _ : state) benchmark::DoNotOptimize(propose_ngram_drafts(tokens, config, out));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(tokens.size()));
}

void BM_ngram_drafts_no_match(benchmark::State& state) {
  std::vector<int32_t> t = random_tokens(state.range(0), 1);
  t.back() = 151936;  // a token id the rest never uses
  run(state, t);
}
BENCHMARK(BM_ngram_drafts_no_match)->ArgName("N")->Arg(4096)->Arg(131072)->Arg(1 << 20);

void BM_ngram_drafts_periodic(benchmark::State& state) {
  const std::vector<int32_t> period = random_tokens(64, 2);
  std::vector<int32_t> t(static_cast<size_t>(state.range(0)));
  for (size_t i = 0; i < t.size(); ++i) t[i] = period[i % period.size()];
  run(state, t);
}
BENCHMARK(BM_ngram_drafts_periodic)->ArgName("N")->Arg(4096)->Arg(1 << 20);

// The tiny drafter, its target's weights and contexts holding a full window of positions.
struct TinyDrafter {
  ThreadPool pool{1};
  std::shared_ptr<BeamWeights> target;
  std::optional<DFlash2Drafter> drafter;
  std::vector<uint16_t> features;  // [window, n_taps * H], random bf16 values

  TinyDrafter() {
    auto t = load_beam_weights("models/tiny-beam");
    auto w = t.ok() ? load_dflash2_weights("models/tiny-beam-dflash2", (*t)->config)
                    : Expected<std::shared_ptr<DFlash2Weights>>(t.error());
    if (!w.ok()) throw std::runtime_error(w.error().message + " (run from the repository root)");
    target = *t;
    const KernelContext cpu{Device::kCpu, &pool};
    auto contexts = DFlash2ContextPool::create(cpu, (*w)->config, 256);
    if (!contexts.ok()) throw std::runtime_error(contexts.error().message);
    drafter.emplace(*w, target->embed, target->lm_head, cpu, *contexts);
    const DFlash2Config& c = drafter->config();
    std::mt19937 rng(3);
    std::normal_distribution<float> normal;
    features.resize(static_cast<size_t>(c.sliding_window * c.num_taps() * c.hidden_size));
    for (uint16_t& f : features) f = to_bf16(normal(rng)).bits;
  }
  TensorView rows(int64_t n) {
    const DFlash2Config& c = drafter->config();
    return TensorView{features.data(), DType::kBF16, Shape{n, c.num_taps() * c.hidden_size}};
  }
  std::shared_ptr<DFlash2Context> full_context() {
    std::shared_ptr<DFlash2Context> ctx = drafter->new_context();
    const int64_t W = drafter->config().sliding_window;
    std::vector<int64_t> positions(static_cast<size_t>(W));
    for (int64_t p = 0; p < W; ++p) positions[p] = p;
    const DFlash2ContextRows items{ctx.get(), 0, positions};
    if (!drafter->add_context(rows(W), {&items, 1}).ok()) throw std::runtime_error("add_context");
    return ctx;
  }
};

TinyDrafter& tiny_drafter() {
  static TinyDrafter d;
  return d;
}

void BM_dflash2_draft(benchmark::State& state) {
  TinyDrafter& d = tiny_drafter();
  const std::shared_ptr<DFlash2Context> ctx = d.full_context();
  const int64_t W = d.drafter->config().sliding_window;
  std::vector<DFlash2Block> blocks(static_cast<size_t>(state.range(0)), {261, W, ctx.get()});
  const auto per_block = static_cast<size_t>(d.drafter->config().max_drafts());
  std::vector<int32_t> drafts(blocks.size() * per_block);
  for (auto _ : state) benchmark::DoNotOptimize(d.drafter->draft(blocks, drafts).ok());
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_dflash2_draft)->ArgName("S")->Arg(1)->Arg(8)->Arg(32);

void BM_dflash2_context(benchmark::State& state) {
  TinyDrafter& d = tiny_drafter();
  const std::shared_ptr<DFlash2Context> ctx = d.drafter->new_context();
  std::vector<int64_t> positions(static_cast<size_t>(state.range(0)));
  for (size_t p = 0; p < positions.size(); ++p) positions[p] = static_cast<int64_t>(p);
  const DFlash2ContextRows items{ctx.get(), 0, positions};
  for (auto _ : state)
    benchmark::DoNotOptimize(d.drafter->add_context(d.rows(state.range(0)), {&items, 1}).ok());
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_dflash2_context)->ArgName("T")->Arg(1)->Arg(12);

}  // namespace
}  // namespace beam

BENCHMARK_MAIN();
