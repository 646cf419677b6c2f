// open_engine_device / kv_budget_bytes / make_kv_allocator: the device-specific part of
// Engine::create; everything after it is the same on every device.
#include "runtime/engine_device.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "model/device_weights.h"
#include "model/memory_plan.h"
#include "runtime/kv_cache/device_kv_allocator.h"

namespace beam {
namespace {

constexpr int64_t kDefaultCpuKvBudgetBytes = int64_t{1} << 30;

std::string gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return buf;
}

}  // namespace

Expected<EngineDevice> open_engine_device(Device device, std::shared_ptr<const BeamWeights> host_weights) {
  EngineDevice d;
  d.device = device;
  switch (device) {
    case Device::kCpu:
      break;
    case Device::kCuda: {
      BEAM_ASSIGN_OR_RETURN(d.cuda, create_cuda_context(0));
      break;
    }
  }
  BEAM_ASSIGN_OR_RETURN(DeviceWeights uploaded, upload_weights(d.context(nullptr), std::move(host_weights)));
  d.weights = std::move(uploaded.weights);
  d.weight_device_bytes = uploaded.device_bytes;
  return d;
}

Expected<int64_t> kv_budget_bytes(const EngineDevice& device, const BeamConfig& config,
                                  std::optional<int64_t> requested, int64_t max_running) {
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
  const DeviceMemoryInfo mem = device_memory_info(device.context(nullptr));
  MemoryPlanOptions po;
  po.gpu_memory_bytes = mem.total_bytes;
  po.max_num_seqs = std::max<int64_t>(1, max_running);
  const int64_t reserve = plan_memory(config, po).activation_reserve_bytes;
  const int64_t budget = mem.free_bytes - reserve;
  if (budget <= 0)
    return make_error("no device memory left for the KV cache: " + gib(mem.free_bytes) + " free of " +
                      gib(mem.total_bytes) + " after the weights (" + gib(device.weight_device_bytes) +
                      "), activation reserve " + gib(reserve) + "; set an explicit KV budget (--kv-budget-mb)");
  return budget;
}

std::unique_ptr<KvMemoryAllocator> make_kv_allocator(const EngineDevice& device) {
  switch (device.device) {
    case Device::kCpu:
      return std::make_unique<HostKvAllocator>();
    case Device::kCuda:
      return std::make_unique<DeviceKvAllocator>(device.context(nullptr));
  }
  return nullptr;
}

}  // namespace beam
