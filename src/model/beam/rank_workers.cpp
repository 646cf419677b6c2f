// RankWorkers: one thread per worker rank, woken by a generation counter for each step.
#include "model/beam/rank_workers.h"

#include <string>

namespace beam {
namespace {

// A rank's status with whether it is the rank's own failure (not a peer's abort reaching it).
struct RankResult {
  Status status;
  bool own = true;
};

RankResult run_one(BeamModel& model, LocalGroup& group, const ForwardBatch& batch,
                   const KvLayers& kv, ForwardOutput& out) {
  try {
    Status st = model.forward(batch, kv, out);
    if (!st.ok())
      group.abort("rank " + std::to_string(model.tensor_parallel().rank) + ": " +
                  st.error().message);
    return {std::move(st), true};
  } catch (const CommAborted& e) {
    return {make_error(e.what()), false};
  }
}

}  // namespace

Expected<std::unique_ptr<RankWorkers>> RankWorkers::create(std::shared_ptr<const BeamWeights> full,
                                                           LocalGroup& group,
                                                           int threads_per_rank) {
  BEAM_RETURN_IF_ERROR(check_tensor_parallel(full->config, group.size()));
  std::unique_ptr<RankWorkers> w(new RankWorkers(group));
  for (int r = 1; r < group.size(); ++r) {
    const TensorParallel tp{r, group.size()};
    Expected<std::shared_ptr<const BeamWeights>> slice = shard_beam_weights(full, tp);
    if (!slice.ok()) return slice.error();
    auto rank = std::make_unique<Rank>();
    rank->pool = std::make_unique<ThreadPool>(threads_per_rank);
    KernelContext ctx;
    ctx.pool = rank->pool.get();
    rank->model = std::make_unique<BeamModel>(std::move(*slice), ctx, nullptr,
                                              ModelShard{tp, &group.rank(r)});
    w->ranks_.push_back(std::move(rank));
  }
  for (int r = 1; r < group.size(); ++r)
    w->ranks_[r - 1]->thread = std::thread([p = w.get(), r] { p->run(r); });
  return w;
}

RankWorkers::~RankWorkers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& rank : ranks_)
    if (rank->thread.joinable()) rank->thread.join();
}

void RankWorkers::run(int r) {
  Rank& rank = *ranks_[r - 1];
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    const ForwardBatch& batch = *batch_;
    const KvLayers& kv = *kv_[r];
    lock.unlock();
    RankResult result = run_one(*rank.model, group_, batch, kv, rank.out);
    lock.lock();
    rank.status = result.own ? std::move(result.status) : ok_status();
    if (--pending_ == 0) cv_.notify_all();
  }
}

Status RankWorkers::forward(BeamModel& rank0, const ForwardBatch& batch,
                            std::span<const KvLayers* const> kv, ForwardOutput& out) {
  BEAM_CHECK(static_cast<int>(kv.size()) == size() && rank0.tensor_parallel().size == size())
      << "RankWorkers::forward: " << kv.size() << " KV caches and a rank 0 of "
      << rank0.tensor_parallel().size << " for " << size() << " ranks";
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch_ = &batch;
    kv_ = kv;
    pending_ = size() - 1;
    ++generation_;
  }
  cv_.notify_all();
  RankResult result0 = run_one(rank0, group_, batch, *kv[0], out);
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return pending_ == 0; });
  Status first = result0.own ? std::move(result0.status) : ok_status();
  for (auto& rank : ranks_)
    if (first.ok() && !rank->status.ok()) first = rank->status;
  if (group_.aborted()) {
    group_.reset();
    if (first.ok()) first = make_error("a tensor-parallel rank stopped the step");
  }
  return first;
}

Status RankWorkers::replace_weights(const std::shared_ptr<const BeamWeights>& full) {
  for (int r = 1; r < size(); ++r) {
    Expected<std::shared_ptr<const BeamWeights>> slice =
        shard_beam_weights(full, TensorParallel{r, size()});
    if (!slice.ok()) return slice.error();
    BEAM_RETURN_IF_ERROR(model(r).replace_weights(std::move(*slice)));
  }
  return ok_status();
}

}  // namespace beam
