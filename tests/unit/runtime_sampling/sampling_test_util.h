// Helpers shared by the sampling tests: building sequence states and hand-made logits rows.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "runtime/sampling/sequence_sampling_state.h"

namespace beam::testing {

struct StateOptions {
  std::vector<int32_t> prompt = {1, 2, 3};
  std::vector<int32_t> eos = {0};
  int64_t vocab_size = 16;
  int64_t max_context_tokens = 1 << 20;
  uint64_t seed = 1234;
  int64_t sibling_index = 0;
};

inline SequenceSamplingState make_state(const SamplingParams& params, const StateOptions& o = {}) {
  SequenceSamplingSetup setup;
  setup.params = std::make_shared<const SamplingParams>(params);
  setup.seed = o.seed;
  setup.sibling_index = o.sibling_index;
  setup.prompt_tokens = o.prompt;
  setup.eos_token_ids = o.eos;
  setup.vocab_size = o.vocab_size;
  setup.max_context_tokens = o.max_context_tokens;
  auto state = SequenceSamplingState::create(setup);
  EXPECT_TRUE(state.ok()) << (state.ok() ? "" : state.error().message);
  return std::move(state).value();
}

// make_state with the default options but the vocabulary size (and seed).
inline SequenceSamplingState state_with_vocab(const SamplingParams& params, int64_t vocab_size,
                                              uint64_t seed = StateOptions{}.seed) {
  StateOptions o;
  o.vocab_size = vocab_size;
  o.seed = seed;
  return make_state(params, o);
}

// Logits whose softmax (at temperature 1) is exactly `probs` up to float rounding.
inline std::vector<float> logits_from_probs(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(p > 0 ? static_cast<float>(std::log(p)) : -INFINITY);
  return logits;
}

// Soft-capped (30 * tanh(z / 30)) random logits, like the model's output.
inline std::vector<float> random_softcapped_logits(int64_t vocab, uint32_t seed, double scale) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (float& v : logits) v = static_cast<float>(30.0 * std::tanh(normal(gen) / 30.0));
  return logits;
}

}  // namespace beam::testing
