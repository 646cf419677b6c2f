// Data parallelism's model-free parts: ReplicaBalancer picks the replica of each request from what
// every replica has in flight and (cache-aware) the prompts each was sent
// (EngineOptions::load_balance); add_replica_stats adds a replica's EngineStats into a total.
// docs/runtime.md "Data parallelism".
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "runtime/engine.h"
#include "runtime/prompt_block_index.h"

namespace beam {

// What ReplicaBalancer needs besides the policy: the replicas' block size and how many prompt
// blocks each replica's index remembers (LoadBalance::kCacheAware: about what its prefix cache
// holds), and the cache-aware thresholds (SGLang's router's defaults).
struct BalancerOptions {
  LoadBalance policy = LoadBalance::kCacheAware;
  int64_t block_tokens = 64;
  int64_t capacity_blocks = 1 << 16;
  double cache_threshold = 0.3;   // the least share of a prompt matched to follow the match
  int64_t balance_abs = 64;       // requests in flight: imbalanced past this difference ...
  double balance_rel = 1.5;       // ... and this ratio, where the shortest queue wins
};

// Thread-safe.
class ReplicaBalancer {
 public:
  // What one replica has in flight.
  struct Load {
    int64_t requests = 0;
    int64_t tokens = 0;  // the `tokens` of take() of the requests not released
  };
  // The request take() places: its cost in tokens, and (kCacheAware) its prompt and namespace
  // (prompt_namespace of its cache salt and adapter).
  struct Request {
    int64_t tokens = 0;
    std::span<const int32_t> prompt = {};
    uint64_t prefix_namespace = 0;
  };

  ReplicaBalancer(int replicas, BalancerOptions options);

  // The replica of `request` (pinned: that one, in [0, replicas)), counted in flight from now
  // until release(). Ties go to the first replica after the last one taken. kCacheAware: while
  // the replicas' loads are balanced (see BalancerOptions), the replica whose index matches the
  // most of the prompt when that is at least cache_threshold of it, else the shortest queue; the
  // prompt's blocks then join the chosen replica's index (a pinned request's too).
  int take(const Request& request, std::optional<int> pinned = std::nullopt);
  // A request take() gave `replica` finished (or was not queued after all).
  void release(int replica, int64_t tokens);
  std::vector<Load> loads() const;

 private:
  // The least loaded replica by `weight` (requests or tokens), scanning from next_.
  int least_loaded(bool by_tokens) const;
  int cache_aware_pick(std::span<const uint64_t> chain, int64_t prompt_tokens) const;

  mutable std::mutex mu_;
  BalancerOptions options_;
  std::vector<Load> loads_;
  std::vector<PromptBlockIndex> indexes_;  // kCacheAware only: one per replica
  int next_ = 0;  // the round robin's next replica, where ties start
};

// Adds `replica` into `total`: counts, pools, rates, the host tier and per-position acceptance
// summed; the last step the latest; the LoRA names merged (sorted, each once); max_loras the
// first replica's (every replica's is the same).
void add_replica_stats(const EngineStats& replica, EngineStats& total);

}  // namespace beam
