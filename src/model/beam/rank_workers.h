// RankWorkers: ranks 1..n-1 of a tensor-parallel model (model/tensor_parallel.h), each on a
// thread of its own, beside rank 0, whose BeamModel and KV cache its owner keeps (the engine's, a
// test's). A worker's model, its thread pool (CPU) or device context (GPU) are made on its thread,
// which a GPU rank's then keeps bound to its device; every later job for the rank runs there too.
// The ranks meet in the CommGroup's collectives inside each forward().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "model/beam/beam_model.h"
#include "model/forward_batch.h"
#include "model/lora_slots.h"

namespace beam {

// What a worker rank runs on: its model and what the model's context points into.
struct WorkerRank {
  std::unique_ptr<ThreadPool> pool;  // a CPU rank's threads
  std::shared_ptr<void> device;      // a GPU rank's context and weights, kept alive
  std::unique_ptr<BeamModel> model;
};

// Rank tp's LoRA slots (LoraSlots::create with options `lora` for that rank), none without `lora`;
// errors name the rank.
Expected<std::unique_ptr<LoraSlots>> rank_lora_slots(const KernelContext& ctx,
                                                     const BeamConfig& cfg,
                                                     std::optional<LoraSlotsOptions> lora,
                                                     TensorParallel tp);

// Owned and called by one thread (rank 0's).
class RankWorkers {
 public:
  // Makes rank r's WorkerRank, on rank r's thread (r in [1, size)).
  using Build = std::function<Expected<WorkerRank>(int r)>;
  // A job for worker rank r on its thread.
  using Job = std::function<Status(int r, BeamModel& model)>;

  // Starts a thread for each rank 1..group.size()-1 and builds its rank there (all at once).
  // group must outlive this. Errors: the first rank's build error.
  static Expected<std::unique_ptr<RankWorkers>> create(CommGroup& group, const Build& build);
  // CPU ranks: rank r's slice (shard_beam_weights) of source(r), a pool of threads_per_rank
  // threads, its end of `group`, `invariance` as rank 0's (KernelContext::batch_invariance: every
  // rank reduces its partials alike), and with `lora` LoRA slots of rank r's share
  // (LoraSlotsOptions::tp set per rank). `source` must outlive create().
  static Build cpu_ranks(const RankWeights& source, CommGroup& group, int threads_per_rank,
                         BatchInvariance invariance = BatchInvariance::kCpuOnly,
                         std::optional<LoraSlotsOptions> lora = std::nullopt);
  ~RankWorkers();  // stops and joins the threads
  RankWorkers(const RankWorkers&) = delete;
  RankWorkers& operator=(const RankWorkers&) = delete;

  int size() const { return group_.size(); }
  // Rank r's model, r in [1, size()); use it on rank r's thread (on_workers) when on a GPU.
  BeamModel& model(int r) { return *ranks_[r - 1]->worker.model; }
  // Rank r's output of the last step (r in [1, size())): the same gathered logits as rank 0's.
  const ForwardOutput& output(int r) const { return ranks_[r - 1]->out; }

  // Runs job(r, model r) on every worker's thread at once and waits; the first error.
  Status on_workers(const Job& job);

  // One step on every rank: rank0.forward(batch, kv[0], out) on this thread while rank r runs
  // forward(batch, kv[r], its own output) on its thread (kv: one KvLayers per rank). Every rank
  // gathers the full logits, so out is the step's result. A rank that fails aborts the group so
  // no other waits for it; the first rank's own error is returned (not the aborts it caused) and
  // the group is reset for the next step. The ranks' KV caches then hold what each wrote.
  Status forward(BeamModel& rank0, const ForwardBatch& batch, std::span<const KvLayers* const> kv,
                 ForwardOutput& out);

  // Serves source(r)'s slice on each rank r >= 1 from now on (BeamModel::replace_weights, on each
  // rank's thread, one rank's load at a time so the host holds one rank's weights); rank 0's
  // owner replaces its own slice. Between forward() calls only. The first rank's error.
  Status replace_weights(const RankWeights& source);

 private:
  struct Rank {
    WorkerRank worker;
    ForwardOutput out;  // rank 0's output is the step's
    Status status;
    std::thread thread;
  };
  // Hands fn(r, rank r) to every worker's thread (the next generation); fn must outlive
  // wait_jobs(), which waits for all and returns the first worker's error.
  void start_jobs(const std::function<Status(int, Rank&)>& fn);
  Status wait_jobs();
  // start_jobs then wait_jobs.
  Status run_jobs(const std::function<Status(int, Rank&)>& fn);
  void loop(int r);

  explicit RankWorkers(CommGroup& group) : group_(group) {}

  CommGroup& group_;
  std::vector<std::unique_ptr<Rank>> ranks_;  // ranks 1..n-1
  // The job handed to the workers: published under mu_ with a new generation.
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  int pending_ = 0;  // workers still running the current job
  bool stop_ = false;
  const std::function<Status(int, Rank&)>* job_ = nullptr;
};

}  // namespace beam
