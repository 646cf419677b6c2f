// CPU ops of a tensor-parallel rank: one rounding of summed partials, a rank's expert ids.
#include "kernels/cpu/shard_ops.h"

#include "kernels/api/moe.h"
#include "kernels/cpu/vec.h"

namespace beam::cpu {

void round_to_bf16(ThreadPool& pool, const TensorView& src, const TensorView& dst) {
  pool.parallel_for(src.numel(), 8192, [&](int64_t i0, int64_t i1) {
    narrow_to_bf16(src.as<float>() + i0, dst.as<bf16>() + i0, i1 - i0);
  });
}

void sum_ranks_to_bf16(ThreadPool& pool, const TensorView& parts, const TensorView& dst) {
  const int64_t n = parts.dim(0), m = dst.numel();
  const float* p = parts.as<float>();
  bf16* out = dst.as<bf16>();
  pool.parallel_for(m, 8192, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float acc = p[i];
      for (int64_t r = 1; r < n; ++r) acc += p[r * m + i];
      out[i] = to_bf16(acc);
    }
  });
}

void localize_expert_ids(const TensorView& ids, int64_t first, int64_t count,
                         const TensorView& local) {
  const int32_t* in = ids.as<int32_t>();
  int32_t* out = local.as<int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i) {
    const int64_t e = in[i];
    out[i] = e >= first && e < first + count ? static_cast<int32_t>(e - first) : kNoExpert;
  }
}

}  // namespace beam::cpu
