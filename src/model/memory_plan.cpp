// plan_memory: the split rule documented in memory_plan.h.
#include "model/memory_plan.h"

#include <algorithm>
#include <cstdio>

#include "core/check.h"
#include "model/param_count.h"

namespace beam {

namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string gb(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GB", static_cast<double>(bytes) / 1e9);
  return buf;
}

}  // namespace

MemoryPlan plan_memory(const BeamConfig& c, const MemoryPlanOptions& o) {
  BEAM_CHECK(o.gpu_memory_bytes > 0 && o.num_gpus > 0 && o.max_num_seqs > 0)
      << "plan_memory options " << o.gpu_memory_bytes << " " << o.num_gpus << " " << o.max_num_seqs;
  MemoryPlan p;
  p.gpu_memory_bytes = o.gpu_memory_bytes;
  p.num_gpus = o.num_gpus;
  p.weight_bytes = ceil_div(weight_bytes(c).total(), o.num_gpus);
  p.host_load_bytes = weight_bytes(c).total() - count_params(c).experts_total * 2;  // bf16 experts
  p.activation_reserve_bytes =
      o.activation_reserve_bytes.value_or(std::max(2 * kGiB, o.gpu_memory_bytes / 25));
  p.kv_heads_per_gpu = ceil_div(c.num_kv_heads, o.num_gpus);
  const int64_t per_layer = 2 * p.kv_heads_per_gpu * c.head_dim * 2;  // K and V, bf16
  p.sliding_bytes_per_token = per_layer * c.num_layers_of(AttentionKind::kSliding);
  p.full_bytes_per_token = per_layer * c.num_layers_of(AttentionKind::kFull);
  if (p.sliding_bytes_per_token > 0) p.sliding_pool_tokens = o.max_num_seqs * c.sliding_window;
  p.sliding_pool_bytes = p.sliding_pool_tokens * p.sliding_bytes_per_token;
  int64_t left = o.gpu_memory_bytes - p.weight_bytes - p.activation_reserve_bytes - p.sliding_pool_bytes;
  if (left <= 0) {
    p.reason = "weights (" + gb(p.weight_bytes) + ") + activation reserve (" +
               gb(p.activation_reserve_bytes) + ") + sliding pool (" + gb(p.sliding_pool_bytes) +
               ") exceed the " + gb(o.gpu_memory_bytes) + " of each GPU";
    return p;
  }
  if (p.full_bytes_per_token > 0) {
    p.full_pool_tokens = left / p.full_bytes_per_token;
    p.full_pool_bytes = p.full_pool_tokens * p.full_bytes_per_token;
  }
  p.fits = true;
  return p;
}

}  // namespace beam
