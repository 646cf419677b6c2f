// RankWorkers: ranks 1..n-1 of a tensor-parallel model run by threads of this process (the CPU
// backend; model/tensor_parallel.h) beside rank 0, whose BeamModel and KV cache its owner keeps
// (the engine's, a test's). Each worker rank has its own weight slice, BeamModel, thread pool and
// thread; the ranks meet in a LocalGroup's collectives inside every forward().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "comm/local_group.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "model/beam/beam_model.h"
#include "model/forward_batch.h"

namespace beam {

// Owned and called by one thread (rank 0's).
class RankWorkers {
 public:
  // Ranks 1..group.size()-1 of `full` (host weights, sliced by shard_beam_weights) on the CPU,
  // with ends 1.. of `group` (which must outlive this); rank 0's BeamModel takes group.rank(0).
  // threads_per_rank: each worker rank's CPU thread pool. Errors: a config that does not split.
  static Expected<std::unique_ptr<RankWorkers>> create(std::shared_ptr<const BeamWeights> full,
                                                       LocalGroup& group, int threads_per_rank);
  ~RankWorkers();  // stops and joins the threads
  RankWorkers(const RankWorkers&) = delete;
  RankWorkers& operator=(const RankWorkers&) = delete;

  int size() const { return group_.size(); }
  // Rank r's model, r in [1, size()).
  BeamModel& model(int r) { return *ranks_[r - 1]->model; }
  // Rank r's output of the last step (r in [1, size())): the same gathered logits as rank 0's.
  const ForwardOutput& output(int r) const { return ranks_[r - 1]->out; }

  // One step on every rank: rank0.forward(batch, kv[0], out) on this thread while rank r runs
  // forward(batch, kv[r], its own output) on its thread (kv: one KvLayers per rank). Every rank
  // gathers the full logits, so out is the step's result. A rank that fails aborts the group so
  // no other waits for it; the first rank's own error is returned (not the aborts it caused) and
  // the group is reset for the next step. The ranks' KV caches then hold what each wrote.
  Status forward(BeamModel& rank0, const ForwardBatch& batch, std::span<const KvLayers* const> kv,
                 ForwardOutput& out);

  // Serves `full` (sliced per rank) on ranks 1.. from now on (BeamModel::replace_weights); rank
  // 0's owner replaces its own slice. Between forward() calls only.
  Status replace_weights(const std::shared_ptr<const BeamWeights>& full);

 private:
  struct Rank {
    std::unique_ptr<ThreadPool> pool;
    std::unique_ptr<BeamModel> model;
    ForwardOutput out;  // rank 0's output is the step's
    Status status;
    std::thread thread;
  };

  explicit RankWorkers(LocalGroup& group) : group_(group) {}
  void run(int r);
  // Runs fn on this rank's model, an exception from a collective (an aborted group) turned into
  // a status; a rank's own error aborts the group for the others.
  Status run_rank(BeamModel& model, const KvLayers& kv, ForwardOutput& out);

  LocalGroup& group_;
  std::vector<std::unique_ptr<Rank>> ranks_;  // ranks 1..n-1
  // The step handed to the workers: published under mu_ with a new generation.
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  int pending_ = 0;  // workers still running the current step
  bool stop_ = false;
  const ForwardBatch* batch_ = nullptr;
  std::span<const KvLayers* const> kv_;
};

}  // namespace beam
