// Engine test helpers: run requests to completion and collect their events per sibling.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/engine.h"

namespace beam::testing {

std::shared_ptr<const BeamWeights> engine_test_model(const std::string& name);

struct SiblingResult {
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;
  std::optional<FinishReason> finish;
  Usage usage;
  int64_t num_events = 0;
  std::vector<int32_t> routed_experts;  // the final event's
  std::vector<TokenLogprobs> prompt_logprobs;  // the first event's
  int64_t events_with_prompt_logprobs = 0;
};

// Collects the events of one request (thread-safe; the engine thread writes).
class Collector {
 public:
  EventSink sink();
  std::vector<SiblingResult> results() const;

 private:
  mutable std::mutex mu_;
  std::map<int32_t, SiblingResult> by_sibling_;
};

struct RunRequest {
  std::vector<int32_t> prompt;
  SamplingParams params;
};

// n tokens drawn uniformly from [0, vocab) by a generator seeded with `seed`.
std::vector<int32_t> tokens_of(int64_t n, uint64_t seed, int64_t vocab);
// Greedy decoding of max_tokens tokens, eos ignored.
SamplingParams greedy(int64_t max_tokens);

// Submits every request at once, waits until idle, returns each request's siblings.
std::vector<std::vector<SiblingResult>> run_all(Engine& engine, const std::vector<RunRequest>& reqs);

// Both pools completely free (after flush_prefix_cache()).
void expect_pools_full(Engine& engine);

}  // namespace beam::testing
