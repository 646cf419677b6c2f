// open_engine_device / kv_budget_bytes / make_kv_allocator: the device-specific part of
// Engine::create; everything after it is the same on every device.
#include "runtime/engine_device.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/logging.h"
#include "model/beam/beam_model.h"
#include "model/beam/local_kv_cache.h"
#include "model/device_weights.h"
#include "model/memory_plan.h"
#include "runtime/engine_ranks.h"
#include "runtime/kv_cache/device_kv_allocator.h"
#include "runtime/kv_cache/releasable_kv_allocator.h"

namespace beam {
namespace {

constexpr int64_t kDefaultCpuKvBudgetBytes = int64_t{1} << 30;
constexpr int64_t kLargeDeviceBytes = int64_t{70} << 30;
constexpr int64_t kLargeDeviceStepTokens = 8192, kDefaultStepTokens = 2048;

}  // namespace

std::string gib_text(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return buf;
}

Expected<EngineDevice> open_engine_device(Device device,
                                          std::shared_ptr<const BeamWeights> host_weights,
                                          bool sleep_mode, int gpu) {
  EngineDevice d;
  d.device = device;
  d.gpu = gpu;
  switch (device) {
    case Device::kCpu:
      break;
    case Device::kCuda: {
      BEAM_ASSIGN_OR_RETURN(d.cuda, create_cuda_context(gpu));
      break;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  BEAM_ASSIGN_OR_RETURN(DeviceWeights uploaded,
                        upload_weights(d.context(nullptr), std::move(host_weights), sleep_mode));
  if (device == Device::kCuda) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    char rate[64];
    std::snprintf(rate, sizeof(rate), " in %.2f s (%.1f GiB/s)", s,
                  static_cast<double>(uploaded.device_bytes) / (1 << 30) / std::max(s, 1e-9));
    log_info("engine: weights on GPU " + std::to_string(gpu) + ": " +
             gib_text(uploaded.device_bytes) + rate);
  }
  d.weights = std::move(uploaded.weights);
  d.weight_device_bytes = uploaded.device_bytes;
  d.weight_memory = std::move(uploaded.memory);
  return d;
}

int64_t default_max_tokens_per_step(Device device, int64_t device_memory_bytes) {
  const bool large = device == Device::kCuda && device_memory_bytes >= kLargeDeviceBytes;
  return large ? kLargeDeviceStepTokens : kDefaultStepTokens;
}

int64_t fit_step_tokens_to_kv_budget(int64_t tokens, const KvGeometry& geometry,
                                     int64_t budget_bytes, int64_t max_running) {
  KvPoolSplit split;
  split.max_running_seqs = max_running;
  for (split.max_step_tokens = tokens; split.max_step_tokens > kDefaultStepTokens;
       split.max_step_tokens = std::max(split.max_step_tokens / 2, kDefaultStepTokens)) {
    if (plan_kv_pools(geometry, budget_bytes, split).ok()) break;
  }
  return split.max_step_tokens;
}

Expected<StepMemory> warm_up_largest_step(const EngineDevice& device, int64_t tokens,
                                          int64_t max_seqs, int64_t block_size,
                                          std::unique_ptr<LoraSlots>& lora, EngineRanks* ranks) {
  KernelContext ctx = device.context(nullptr);  // CUDA ops need no host pool
  ctx.cuda_graphs = false;  // a step of one-token sequences would capture a decode graph
  const BeamConfig& c = device.weights->config;
  const int64_t seqs = std::min(max_seqs, tokens), per_seq = (tokens + seqs - 1) / seqs;
  const auto start = std::chrono::steady_clock::now();
  const int64_t free_before = device_memory_info(ctx).free_bytes;
  auto fail = [tokens](const std::string& why) {
    return make_error("a step of " + std::to_string(tokens) + " tokens does not fit the device (" +
                      why + "); lower --max-tokens-per-step");
  };
  const int32_t lora_slot = lora ? 0 : kNoLoraSlot;
  BeamModel model(device.weights, ctx, std::move(lora),
                  ranks ? ranks->rank0_shard() : ModelShard{});
  struct GiveBack {  // the slots go back to the caller on every return
    BeamModel& model;
    std::unique_ptr<LoraSlots>& lora;
    ~GiveBack() { lora = model.release_lora_slots(); }
  } give_back{model, lora};
  std::optional<LocalKvCache> cache;
  {
    Expected<LocalKvCache> created =
        LocalKvCache::create(ctx, c, seqs, per_seq, block_size, model.tensor_parallel());
    if (!created.ok()) return fail(created.error().message);
    cache.emplace(std::move(*created));
  }
  std::vector<int32_t> ids(static_cast<size_t>(tokens));
  for (size_t i = 0; i < ids.size(); ++i)  // spread over the vocabulary, so over the experts
    ids[i] = static_cast<int32_t>((static_cast<int64_t>(i) * 7919 + 1) % c.vocab_size);
  ForwardBatch batch;
  for (int64_t s = 0, begin = 0; s < seqs; ++s) {
    const int64_t n = tokens / seqs + (s < tokens % seqs ? 1 : 0);
    const auto table = cache->block_table(s);
    batch.seqs.push_back(
        SeqChunk{std::span<const int32_t>(ids).subspan(begin, n), 0, 0, table, table, false});
    batch.seqs.back().lora_slot = lora_slot;
    begin += n;
  }
  ForwardOutput out;  // logits copied back: the step is finished when forward returns
  const Status st = ranks ? ranks->warm_up_step(model, *cache, batch, seqs, per_seq, out)
                          : model.forward(batch, cache->layers(), out);
  if (!st.ok()) return fail(st.error().message);
  cache.reset();  // the scratch KV goes; the model keeps its activations for the measure
  DeviceMemoryInfo during = device_memory_info(ctx);
  if (ranks) {
    BEAM_ASSIGN_OR_RETURN(DeviceMemoryInfo least, ranks->least_free_memory());
    if (least.free_bytes < during.free_bytes) during = least;
  }
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  return StepMemory{during.free_bytes, during.total_bytes, free_before - during.free_bytes,
                    took.count()};
}

Expected<int64_t> kv_budget_bytes(const EngineDevice& device, const BeamConfig& config,
                                  std::optional<int64_t> requested, int64_t max_running,
                                  const std::optional<StepMemory>& step) {
  if (requested) {
    if (*requested <= 0) return make_error("KV budget must be positive, got " + std::to_string(*requested) + " bytes");
    return *requested;
  }
  switch (device.device) {
    case Device::kCpu:
      return kDefaultCpuKvBudgetBytes;
    case Device::kCuda:
      break;
  }
  BEAM_CHECK(step.has_value()) << "kv_budget_bytes: CUDA needs the largest step's memory";
  MemoryPlanOptions po;
  po.gpu_memory_bytes = step->total_bytes;
  po.max_num_seqs = std::max<int64_t>(1, max_running);
  const int64_t reserve = plan_memory(config, po).activation_reserve_bytes;
  const int64_t budget = step->free_bytes - reserve;
  if (budget <= 0)
    return make_error(
        "no device memory left for the KV cache: " + gib_text(step->free_bytes) + " free of " +
        gib_text(step->total_bytes) + " after the weights (" +
        gib_text(device.weight_device_bytes) + ") and the largest step (" +
        gib_text(step->step_bytes) + "), headroom " + gib_text(reserve) +
        "; lower --max-tokens-per-step or set an explicit KV budget (--kv-budget-mb)");
  return budget;
}

std::unique_ptr<KvMemoryAllocator> make_kv_allocator(const EngineDevice& device, bool sleep_mode) {
  if (sleep_mode) return std::make_unique<ReleasableKvAllocator>(device.context(nullptr));
  switch (device.device) {
    case Device::kCpu:
      return std::make_unique<HostKvAllocator>();
    case Device::kCuda:
      return std::make_unique<DeviceKvAllocator>(device.context(nullptr));
  }
  return nullptr;
}

}  // namespace beam
