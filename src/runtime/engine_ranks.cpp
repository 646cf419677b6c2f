// EngineRanks: the worker ranks of a tensor-parallel engine, their devices and KV storage. Every
// worker's device work runs on its own thread (RankWorkers::on_workers), which a GPU rank's
// keeps bound to its GPU (rank 0's GPU + r); the engine's thread stays on rank 0's.
#include "runtime/engine_ranks.h"

#include <algorithm>
#include <mutex>
#include <string>

#include "comm/local_group.h"
#include "runtime/kv_cache/releasable_kv_allocator.h"
#if BEAMSERVE_CUDA
#include "comm/nccl_group.h"
#endif

namespace beam {
namespace {

// The group of `size` ranks on rank0's kind of device: threads, or rank 0's GPU and the next
// size - 1 through NCCL (rank 0's stream bound).
Expected<std::unique_ptr<CommGroup>> make_group(int size, const EngineDevice& rank0) {
  switch (rank0.device) {
    case Device::kCpu:
      return std::unique_ptr<CommGroup>(std::make_unique<LocalGroup>(size));
    case Device::kCuda: {
#if BEAMSERVE_CUDA
      BEAM_ASSIGN_OR_RETURN(std::unique_ptr<NcclGroup> nccl, NcclGroup::create(size, rank0.gpu));
      nccl->bind_stream(0, native_stream(rank0.context(nullptr)));
      return std::unique_ptr<CommGroup>(std::move(nccl));
#else
      return make_error("tensor parallelism on CUDA: this build has no CUDA backend");
#endif
    }
  }
  return make_error("tensor parallelism: unknown device");
}

}  // namespace

Expected<std::unique_ptr<EngineRanks>> EngineRanks::create(const RankWeights& source, int size,
                                                           const EngineDevice& rank0,
                                                           int threads_per_rank, bool sleep_mode,
                                                           std::optional<LoraSlotsOptions> lora) {
  BEAM_RETURN_IF_ERROR(check_tensor_parallel(rank0.weights->config, size));
  std::unique_ptr<EngineRanks> ranks(new EngineRanks());
  BEAM_ASSIGN_OR_RETURN(ranks->group_, make_group(size, rank0));
  ranks->workers_.resize(static_cast<size_t>(size - 1));
  CommGroup& group = *ranks->group_;
  RankWorkers::Build build;
  std::mutex one_at_a_time;  // GPU ranks' host weights: one rank's load and upload at once
  if (rank0.device == Device::kCpu) {
    build = RankWorkers::cpu_ranks(source, group, threads_per_rank, rank0.batch_invariance, lora);
  } else {
    build = [&](int r) -> Expected<WorkerRank> {
      const TensorParallel tp{r, size};
      std::unique_lock<std::mutex> lock(one_at_a_time);
      BEAM_ASSIGN_OR_RETURN(std::shared_ptr<const BeamWeights> slice, load_rank_slice(source, tp));
      BEAM_ASSIGN_OR_RETURN(EngineDevice d,
                            open_engine_device(Device::kCuda, std::move(slice), sleep_mode,
                                                               rank0.gpu + r));
      lock.unlock();  // the host copy is gone (uploaded)
      d.cuda_graphs = rank0.cuda_graphs;
      d.batch_invariance = rank0.batch_invariance;
      d.attention_probs = rank0.attention_probs;
#if BEAMSERVE_CUDA
      static_cast<NcclGroup&>(group).bind_stream(r, native_stream(d.context(nullptr)));
#endif
      auto device = std::make_shared<EngineDevice>(std::move(d));
      ranks->workers_[r - 1].device = device;
      std::optional<LoraSlotsOptions> slots_options = lora;
      if (slots_options) slots_options->releasable = sleep_mode && device->weight_memory != nullptr;
      BEAM_ASSIGN_OR_RETURN(std::unique_ptr<LoraSlots> slots,
                            rank_lora_slots(device->context(nullptr), device->weights->config,
                                            slots_options, tp));
      WorkerRank w;
      w.model = std::make_unique<BeamModel>(device->weights, device->context(nullptr),
                                            std::move(slots), ModelShard{tp, &group.rank(r)});
      w.device = device;
      return w;
    };
  }
  BEAM_ASSIGN_OR_RETURN(ranks->ranks_, RankWorkers::create(group, build));
  ranks->kv_.assign(static_cast<size_t>(size), nullptr);
  return ranks;
}

EngineRanks::~EngineRanks() {
  // Each worker's device memory goes on its own thread (its GPU current) before the threads stop.
  if (ranks_)
    (void)ranks_->on_workers([this](int r, BeamModel&) {
      workers_[r - 1].host.reset();  // waits for its copies, before the storage goes
      workers_[r - 1].storage.reset();
      workers_[r - 1].scratch.reset();
      workers_[r - 1].allocator.reset();
      workers_[r - 1].device.reset();  // RankWorkers lets go of the last reference on the thread
      return ok_status();
    });
}

Status EngineRanks::warm_up_step(BeamModel& rank0, const LocalKvCache& cache0,
                                 const ForwardBatch& batch, int64_t num_seqs, int64_t max_tokens,
                                 ForwardOutput& out) {
  const int64_t block = cache0.layers().layers[0].block_size;
  const int n = size();
  Status st = ranks_->on_workers([&](int r, BeamModel& model) -> Status {
    BEAM_ASSIGN_OR_RETURN(LocalKvCache cache,
                          LocalKvCache::create(model.context(), model.config(), num_seqs,
                                               max_tokens, block, TensorParallel{r, n}));
    workers_[r - 1].scratch.emplace(std::move(cache));
    kv_[r] = &workers_[r - 1].scratch->layers();
    return ok_status();
  });
  if (st.ok()) {
    kv_[0] = &cache0.layers();
    st = ranks_->forward(rank0, batch, kv_, out);
  }
  (void)ranks_->on_workers([this](int r, BeamModel& model) {
    synchronize(model.context());
    workers_[r - 1].scratch.reset();
    return ok_status();
  });
  return st;
}

Expected<DeviceMemoryInfo> EngineRanks::least_free_memory() {
  std::vector<DeviceMemoryInfo> info(workers_.size());
  BEAM_RETURN_IF_ERROR(ranks_->on_workers([&](int r, BeamModel& model) {
    info[r - 1] = device_memory_info(model.context());
    return ok_status();
  }));
  DeviceMemoryInfo least = info.front();
  for (const DeviceMemoryInfo& i : info)
    if (i.free_bytes < least.free_bytes) least = i;
  return least;
}

Status EngineRanks::allocate_kv(const KvGeometry& rank_geometry, const KvPoolSizes& sizes,
                                bool sleep_mode) {
  BEAM_RETURN_IF_ERROR(ranks_->on_workers([&](int r, BeamModel& model) -> Status {
    Worker& w = workers_[r - 1];
    if (sleep_mode) {
      w.allocator = std::make_unique<ReleasableKvAllocator>(model.context());
    } else if (w.device) {
      w.allocator = make_kv_allocator(*w.device, /*sleep_mode=*/false);
    } else {
      w.allocator = std::make_unique<HostKvAllocator>();
    }
    BEAM_ASSIGN_OR_RETURN(KvStorage storage, KvStorage::create(rank_geometry, sizes, *w.allocator));
    w.storage.emplace(std::move(storage));
    if (sleep_mode)
      w.sleep = SleepController(model.context(), w.device ? w.device->weight_memory : nullptr,
                                model.lora_slots(),
                                &static_cast<ReleasableKvAllocator&>(*w.allocator));
    return ok_status();
  }));
  for (int r = 1; r < size(); ++r) kv_[r] = &workers_[r - 1].storage->layers();
  return ok_status();
}

Status EngineRanks::forward(BeamModel& rank0, const KvStorage& storage0, const ForwardBatch& batch,
                            ForwardOutput& out) {
  kv_[0] = &storage0.layers();
  return ranks_->forward(rank0, batch, kv_, out);
}

void EngineRanks::copy_blocks(std::span<const BlockCopy> copies) {
  if (copies.empty()) return;
  (void)ranks_->on_workers([&](int r, BeamModel&) {
    workers_[r - 1].storage->copy_blocks(copies);
    return ok_status();
  });
}

Status EngineRanks::allocate_host_kv(BlockCounts slots) {
  return ranks_->on_workers([&](int r, BeamModel& model) -> Status {
    Worker& w = workers_[r - 1];
    Expected<HostKvStore> host = HostKvStore::create(model.context(), *w.storage, slots);
    if (!host.ok()) return make_error("rank " + std::to_string(r) + ": " + host.error().message);
    w.host.emplace(std::move(*host));
    return ok_status();
  });
}

void EngineRanks::host_copies(std::span<const HostCopy> copies) {
  (void)ranks_->on_workers([&](int r, BeamModel&) {
    for (const HostCopy& c : copies) workers_[r - 1].host->apply(c);
    return ok_status();
  });
}

int64_t EngineRanks::host_kv_bytes() const {
  int64_t bytes = 0;
  for (const Worker& w : workers_)
    if (w.host) bytes += w.host->bytes();
  return bytes;
}

Status EngineRanks::replace_weights(const RankWeights& source) {
  BEAM_RETURN_IF_ERROR(ranks_->replace_weights(source));
  for (Worker& w : workers_) w.sleep.weights_replaced();
  return ok_status();
}

Status EngineRanks::read_weight_parts(const std::string& name, int64_t max_rows,
                                      std::vector<WeightPart>& parts) {
  return ranks_->on_workers([&, n = size()](int r, BeamModel& model) -> Status {
    BEAM_ASSIGN_OR_RETURN(parts[static_cast<size_t>(r)],
                          read_weight_part(model.context(), model.weights(), {r, n}, name, max_rows));
    return ok_status();
  });
}

Expected<int64_t> EngineRanks::sleep(SleepLevel level, bool weights, bool kv_cache) {
  std::vector<int64_t> released(workers_.size(), 0);
  BEAM_RETURN_IF_ERROR(ranks_->on_workers([&](int r, BeamModel& model) -> Status {
    BEAM_ASSIGN_OR_RETURN(int64_t bytes, workers_[r - 1].sleep.sleep(level, weights, kv_cache));
    released[r - 1] = bytes + static_cast<int64_t>(model.release_eager_workspace());
    return ok_status();
  }));
  int64_t total = 0;
  for (int64_t b : released) total += b;
  return total;
}

Status EngineRanks::gather_lm_head(const KernelContext& rank0, const TensorView& rank0_rows,
                                   const TensorView& whole) {
  const int64_t rows = rank0_rows.dim(0), H = rank0_rows.dim(1);
  BEAM_CHECK(whole.shape == Shape({size() * rows, H}) && whole.dtype == DType::kBF16)
      << "gather_lm_head: " << whole.shape.str() << " for " << size() << " x " << rows << " rows";
  copy_tensor(rank0, whole.rows(0, rows), rank0_rows);
  synchronize(rank0);
  // Each worker copies its rows on its own thread and stream (a GPU rank's into GPU 0's memory).
  BEAM_RETURN_IF_ERROR(ranks_->on_workers([&](int r, BeamModel& model) -> Status {
    const TensorView mine = model.weights().lm_head;
    if (mine.shape != rank0_rows.shape)
      return make_error("rank " + std::to_string(r) + "'s LM head " + mine.shape.str() +
                        ", rank 0's " + rank0_rows.shape.str());
    copy_tensor(model.context(), whole.rows(r * rows, rows), mine);
    synchronize(model.context());
    return ok_status();
  }));
  return ok_status();
}

Status EngineRanks::load_lora(int32_t slot, const LoraAdapter& adapter) {
  return ranks_->on_workers([&](int r, BeamModel& model) -> Status {
    Status st = model.lora_slots()->load(model.context(), slot, adapter);
    if (!st.ok()) return make_error("rank " + std::to_string(r) + ": " + st.error().message);
    return ok_status();
  });
}

Status EngineRanks::wake_up(bool weights, bool kv_cache) {
  return ranks_->on_workers(
      [&](int r, BeamModel&) { return workers_[r - 1].sleep.wake_up(weights, kv_cache); });
}

}  // namespace beam
