// The reference's golden sequences of a model directory (golden/manifest.json + .npy files), shared
// by the CPU golden test (model_beam) and the GPU one (model_beam_cuda).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/npy.h"

namespace beam::testing {

struct GoldenSequence {
  std::string name;
  int64_t start_pos = 0;
  int64_t chunk = 0;  // > 0: the golden was computed by chunked prefill; run it the same way
  std::vector<int32_t> tokens;
  NpyArray logits, experts, margins;

  // The golden check's ||Δ||/||ref|| bound: 2e-2, 0.1 for sequences starting at position >= 10^6.
  double tolerance() const { return start_pos >= 1000000 ? 0.1 : 2e-2; }
};

// Every sequence of models/<model>/golden/manifest.json (gtest failures for missing files).
std::vector<GoldenSequence> load_goldens(const std::string& model);

// models/beam-nano/golden/greedy.json: the reference's greedy continuations of held-out prompts.
struct GreedyCase {
  std::string prompt;
  std::vector<int32_t> prompt_ids, generated_ids;
  std::string generated_text;
};
struct GreedyGoldens {
  int64_t max_new_tokens = 0;
  std::vector<int32_t> stop_token_ids;
  std::vector<GreedyCase> cases;
};
GreedyGoldens load_greedy_goldens(const std::string& model);

}  // namespace beam::testing
