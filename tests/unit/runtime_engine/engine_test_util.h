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
// Synthetic weights of `config` (seed 7): another model of the same architecture.
std::shared_ptr<const BeamWeights> other_synthetic_weights(const BeamConfig& config);
// An engine for the control tests (weight updates, sleep, pause): 2 threads, 16-token blocks, 64
// tokens a step, a 64 MiB KV budget, sleep mode as asked.
std::unique_ptr<Engine> control_test_engine(std::shared_ptr<const BeamWeights> weights,
                                            bool sleep_mode);

struct SiblingResult {
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;
  std::vector<float> entropies;
  std::vector<std::vector<TokenLogprob>> token_ids_logprobs;
  std::optional<FinishReason> finish;
  Usage usage;
  int64_t num_events = 0;
  std::vector<int32_t> routed_experts;  // the final event's
  std::vector<uint16_t> hidden_states;  // the final event's
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
  std::string lora_name = {};  // GenerateRequest::lora_name
  bool return_routed_experts = false;  // from position 0
  bool return_hidden_states = false;
};

// n tokens drawn uniformly from [0, vocab) by a generator seeded with `seed`.
std::vector<int32_t> tokens_of(int64_t n, uint64_t seed, int64_t vocab);
// Greedy decoding of max_tokens tokens, eos ignored.
SamplingParams greedy(int64_t max_tokens);

// Equal tokens, finishes, completion counts, routed experts, hidden states (bit for bit),
// entropies (within 1e-4) and logprobs (chosen within 1e-4,
// the same top tokens), request by request and sibling by sibling.
void expect_same_results(const std::vector<std::vector<SiblingResult>>& plain,
                         const std::vector<std::vector<SiblingResult>>& spec);

// r as the engine's request, its events to `sink`.
GenerateRequest generate_request(const RunRequest& r, EventSink sink);
// Submits r to engine without waiting; its events go to *out.
void submit(Engine& engine, const RunRequest& r, Collector* out);
// Waits (up to 20 s) until the request of `c` has written output; a test failure otherwise.
void wait_for_output(const Collector& c);

// Submits every request at once, waits until idle, returns each request's siblings.
std::vector<std::vector<SiblingResult>> run_all(Engine& engine, const std::vector<RunRequest>& reqs);

// Both pools completely free (after flush_prefix_cache()).
void expect_pools_full(Engine& engine);

// A reasoning budget on `model` with no start token (the output starts in the reasoning) of
// `max_tokens`, ending with two byte tokens the model rarely writes; greedy and sampled (n = 3)
// requests of 3 * max_tokens tokens on prompts of its vocabulary; and the check that each output
// holds the end tokens right after max_tokens reasoning tokens (or after the model's own close).
ReasoningBudget test_reasoning_budget(int64_t max_tokens);
std::vector<RunRequest> reasoning_budget_requests(const ReasoningBudget& budget, int64_t vocab);
void expect_reasoning_budget_kept(const std::vector<int32_t>& tokens,
                                  const ReasoningBudget& budget);

}  // namespace beam::testing
