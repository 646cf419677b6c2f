// RankWorkers: one thread per worker rank, woken by a generation counter for each job.
#include "model/beam/rank_workers.h"

#include <string>

#include "model/device_weights.h"

namespace beam {
namespace {

// A rank's step status with whether it is the rank's own failure (not a peer's abort reaching it).
struct RankResult {
  Status status;
  bool own = true;
};

RankResult run_step(BeamModel& model, CommGroup& group, const ForwardBatch& batch,
                    const KvLayers& kv, ForwardOutput& out) {
  try {
    Status st = model.forward(batch, kv, out);
    if (!st.ok()) {
      group.abort("rank " + std::to_string(model.tensor_parallel().rank) + ": " +
                  st.error().message);
      return {std::move(st), true};
    }
    // A GPU rank's collectives return on an aborted group without doing the work: its output
    // then means nothing (the rank that failed says why).
    if (group.aborted()) return {make_error("the step was aborted"), false};
    return {std::move(st), true};
  } catch (const CommAborted& e) {
    return {make_error(e.what()), false};
  }
}

}  // namespace

Expected<std::unique_ptr<RankWorkers>> RankWorkers::create(CommGroup& group, const Build& build) {
  std::unique_ptr<RankWorkers> w(new RankWorkers(group));
  for (int r = 1; r < group.size(); ++r) w->ranks_.push_back(std::make_unique<Rank>());
  for (int r = 1; r < group.size(); ++r)
    w->ranks_[r - 1]->thread = std::thread([p = w.get(), r] { p->loop(r); });
  BEAM_RETURN_IF_ERROR(w->run_jobs([&build](int r, Rank& rank) -> Status {
    BEAM_ASSIGN_OR_RETURN(rank.worker, build(r));
    return ok_status();
  }));
  return w;
}

RankWorkers::Build RankWorkers::cpu_ranks(const RankWeights& source, CommGroup& group,
                                          int threads_per_rank, BatchInvariance invariance,
                                          std::optional<LoraSlotsOptions> lora) {
  return [&source, &group, threads_per_rank, invariance, lora](int r) -> Expected<WorkerRank> {
    const TensorParallel tp{r, group.size()};
    BEAM_ASSIGN_OR_RETURN(std::shared_ptr<const BeamWeights> slice, load_rank_slice(source, tp));
    WorkerRank w;
    w.pool = std::make_unique<ThreadPool>(threads_per_rank);
    KernelContext ctx;
    ctx.pool = w.pool.get();
    ctx.batch_invariance = invariance;
    BEAM_ASSIGN_OR_RETURN(DeviceWeights served, upload_weights(ctx, std::move(slice)));
    slice = std::move(served.weights);  // as the CPU holds them (synthetic ones filled)
    BEAM_ASSIGN_OR_RETURN(std::unique_ptr<LoraSlots> slots,
                          rank_lora_slots(ctx, slice->config, lora, tp));
    w.model = std::make_unique<BeamModel>(std::move(slice), ctx, std::move(slots),
                                          ModelShard{tp, &group.rank(r)});
    return w;
  };
}

Expected<std::unique_ptr<LoraSlots>> rank_lora_slots(const KernelContext& ctx,
                                                     const BeamConfig& cfg,
                                                     std::optional<LoraSlotsOptions> lora,
                                                     TensorParallel tp) {
  if (!lora) return std::unique_ptr<LoraSlots>();
  lora->tp = tp;
  Expected<std::unique_ptr<LoraSlots>> slots = LoraSlots::create(ctx, cfg, *lora);
  if (!slots.ok())
    return make_error("rank " + std::to_string(tp.rank) + ": " + slots.error().message);
  return slots;
}

RankWorkers::~RankWorkers() {
  // Each rank's model and device go on its own thread (a GPU rank's device current there).
  (void)run_jobs([](int, Rank& rank) {
    rank.worker = WorkerRank();
    return ok_status();
  });
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& rank : ranks_)
    if (rank->thread.joinable()) rank->thread.join();
}

void RankWorkers::loop(int r) {
  Rank& rank = *ranks_[r - 1];
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    const auto& job = *job_;
    lock.unlock();
    Status st = job(r, rank);
    lock.lock();
    rank.status = std::move(st);
    if (--pending_ == 0) cv_.notify_all();
  }
}

void RankWorkers::start_jobs(const std::function<Status(int, Rank&)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  job_ = &fn;
  pending_ = size() - 1;
  ++generation_;
  cv_.notify_all();
}

Status RankWorkers::wait_jobs() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
  for (auto& rank : ranks_)
    if (!rank->status.ok()) return rank->status;
  return ok_status();
}

Status RankWorkers::run_jobs(const std::function<Status(int, Rank&)>& fn) {
  start_jobs(fn);
  return wait_jobs();
}

Status RankWorkers::on_workers(const Job& job) {
  return run_jobs([&job](int r, Rank& rank) { return job(r, *rank.worker.model); });
}

Status RankWorkers::forward(BeamModel& rank0, const ForwardBatch& batch,
                            std::span<const KvLayers* const> kv, ForwardOutput& out) {
  BEAM_CHECK(static_cast<int>(kv.size()) == size() && rank0.tensor_parallel().size == size())
      << "RankWorkers::forward: " << kv.size() << " KV caches and a rank 0 of "
      << rank0.tensor_parallel().size << " for " << size() << " ranks";
  // The workers' own errors (not the aborts they saw) are their job statuses.
  const std::function<Status(int, Rank&)> step = [&](int r, Rank& rank) {
    RankResult result = run_step(*rank.worker.model, group_, batch, *kv[r], rank.out);
    return result.own ? std::move(result.status) : ok_status();
  };
  start_jobs(step);
  RankResult result0 = run_step(rank0, group_, batch, *kv[0], out);
  const Status workers = wait_jobs();
  // The first rank's own error: rank 0's, else a worker's.
  Status first = result0.own && !result0.status.ok() ? std::move(result0.status) : workers;
  if (group_.aborted()) {
    if (first.ok()) first = make_error("a tensor-parallel rank stopped the step");
    if (Status reset = group_.reset(); !reset.ok())
      first = make_error(first.error().message +
                         "; the ranks' group cannot resume: " + reset.error().message);
    // Decode graphs captured the old communicators' collectives.
    rank0.drop_decode_graphs();
    (void)on_workers([](int, BeamModel& model) {
      model.drop_decode_graphs();
      return ok_status();
    });
  }
  return first;
}

Status RankWorkers::replace_weights(const RankWeights& source) {
  std::mutex one_at_a_time;
  return on_workers([&, n = size()](int r, BeamModel& model) -> Status {
    const TensorParallel tp{r, n};
    std::lock_guard<std::mutex> lock(one_at_a_time);
    BEAM_ASSIGN_OR_RETURN(std::shared_ptr<const BeamWeights> slice, load_rank_slice(source, tp));
    return model.replace_weights(std::move(slice));
  });
}

}  // namespace beam
