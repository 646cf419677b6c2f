// The engine's host-side work per step (Google Benchmark): n-gram draft proposal
// (propose_ngram_drafts) over a sequence of N tokens whose last token never occurred before (a
// full scan: the worst case, paid by every speculating sequence each step) and over one that
// repeats a 64-token period (a match at once).
// Run: build/<dir>/tools/bench/runtime_bench
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

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

}  // namespace
}  // namespace beam

BENCHMARK_MAIN();
