// Data parallelism's model-free parts: ReplicaBalancer picks the replica of each request from what
// every replica has in flight (EngineOptions::load_balance); add_replica_stats adds a replica's
// EngineStats into a total. docs/runtime.md "Data parallelism".
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "runtime/engine.h"

namespace beam {

// Thread-safe.
class ReplicaBalancer {
 public:
  // What one replica has in flight.
  struct Load {
    int64_t requests = 0;
    int64_t tokens = 0;  // the `tokens` of take() of the requests not released
  };

  ReplicaBalancer(int replicas, LoadBalance policy);

  // The replica of a request costing `tokens` (pinned: that one, in [0, replicas)), counted in
  // flight from now until release(). Ties go to the replica after the last one taken.
  int take(int64_t tokens, std::optional<int> pinned = std::nullopt);
  // A request take() gave `replica` finished (or was not queued after all).
  void release(int replica, int64_t tokens);
  std::vector<Load> loads() const;

 private:
  mutable std::mutex mu_;
  LoadBalance policy_;
  std::vector<Load> loads_;
  int next_ = 0;  // the round robin's next replica, where ties start
};

// Adds `replica` into `total`: counts, pools, rates, the host tier and per-position acceptance
// summed; the last step the latest; the LoRA names merged (sorted, each once); max_loras the
// first replica's (every replica's is the same).
void add_replica_stats(const EngineStats& replica, EngineStats& total);

}  // namespace beam
