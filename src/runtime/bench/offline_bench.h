// Offline engine benchmark: synthetic workloads (uniform, shared-prefix, multi-turn agentic
// replay) driven through Engine with per-request TTFT/ITL and prefix-cache hit rates.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/engine.h"

namespace beam {

enum class Workload { kUniform, kSharedPrefix, kAgentic };

Expected<Workload> parse_workload(const std::string& name);

struct WorkloadOptions {
  Workload workload = Workload::kUniform;
  int64_t requests = 32;            // uniform, shared-prefix
  int64_t prompt_len = 256;         // uniform: whole prompt; shared-prefix: unique suffix
  int64_t shared_prefix_len = 512;  // shared-prefix: common to every request
  int64_t output_len = 64;
  int64_t conversations = 8;        // agentic: run concurrently
  int64_t turns = 13;
  int64_t first_prompt_len = 2048;
  int64_t turn_append_len = 750;
  // agentic: one-off prompts (first_prompt_len random tokens, never sent again) submitted beside
  // every turn: background traffic that competes with the sessions for the caches. Counted in
  // the totals, not in the per-turn hit rates.
  int64_t one_off_per_turn = 0;
  uint64_t seed = 1;
  // Every request's output constraint (structured output); null: free output with ignore_eos.
  // A constrained output may end before output_len (the JSON decides, not ignore_eos).
  std::shared_ptr<const OutputConstraint> constraint;
};

struct BenchResult {
  int64_t requests = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;
  int64_t output_tokens = 0;
  int64_t failed = 0;
  double wall_s = 0;
  double output_tokens_per_s = 0;
  double total_tokens_per_s = 0;
  double ttft_ms_p50 = 0, ttft_ms_p99 = 0;
  double itl_ms_p50 = 0, itl_ms_p99 = 0;
  double prefix_cache_hit_rate = 0;        // cached / prompt tokens, all requests
  double prefix_cache_hit_rate_later = 0;  // agentic: turns 2+ only
  std::vector<double> hit_rate_by_turn;    // agentic: per turn
  int64_t preemptions = 0;
  // Engine steps, and speculative decoding's verified and accepted drafts (EngineStats).
  int64_t steps = 0;
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  // The hierarchical cache's host tier (EngineStats::host_cache): prompt tokens restored from it,
  // and blocks copied to and from it (full + sliding).
  int64_t host_restored_tokens = 0;
  int64_t host_saved_blocks = 0;
  int64_t host_loaded_blocks = 0;
  int64_t host_unused_blocks = 0;  // full blocks loaded back, then evicted unused
};

// Runs the workload to completion on `engine` (greedy decoding; ignore_eos and exact output_len
// unless the options carry a constraint).
BenchResult run_offline_bench(Engine& engine, const WorkloadOptions& options);

}  // namespace beam
