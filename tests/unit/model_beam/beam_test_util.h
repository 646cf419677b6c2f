// Test helpers for the forward pass: load a model directory once, run prefills and chunked runs
// through LocalKvCache, and compare logits the way the golden check does. Shared with
// tests/unit/model_beam_cuda (its libs.cmake compiles this folder's helper sources).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/beam/beam_model.h"
#include "model/beam/local_kv_cache.h"

namespace beam::testing {

inline std::string model_path(const std::string& name) {
  return std::string(BEAMSERVE_SOURCE_DIR) + "/models/" + name;
}

// Loads weights once per process (tests share them read-only).
std::shared_ptr<const BeamWeights> load_model(const std::string& name);

// Logits [T, V] of one sequence: tokens fed in chunks of chunk_size (0 = all at once) starting
// at absolute position start_pos, with a KV cache on the model's device. With `experts`, the
// steps capture routing (ForwardBatch::capture_routing) and (*experts)[t] gets token t's sorted
// expert choices of every MoE layer, concatenated.
std::vector<float> run_chunked(BeamModel& model, const std::vector<int32_t>& tokens,
                               int64_t start_pos, int64_t chunk_size,
                               std::vector<std::vector<int32_t>>* experts = nullptr);

struct LogitsComparison {
  double rel_error = 0;            // ||a - ref|| / ||ref|| over all rows
  int64_t argmax_mismatches = 0;   // rows whose ref top-1/top-2 margin ≥ min_margin
  int64_t rows_checked = 0;
};

LogitsComparison compare_logits(const std::vector<float>& got, const std::vector<float>& ref,
                                int64_t vocab, float min_margin = 0.5f);

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed);

// How many tokens of a greedy continuation `generated` of `prompt` the model (the CPU reference)
// chose with a top-1/top-2 logit margin of at least min_margin before the first step below it.
// Later tokens may differ legitimately between summation orders (other devices, batch shapes),
// so parity checks compare this prefix (issue 7: identical greedy tokens where the margin >= 0.5).
int64_t confident_prefix(BeamModel& model, const std::vector<int32_t>& prompt,
                         const std::vector<int32_t>& generated, float min_margin = 0.5f);

}  // namespace beam::testing
