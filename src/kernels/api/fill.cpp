// fill_random: argument checks, device dispatch and the CPU fill. The hash and the normal
// approximation are repeated in kernels/cuda/fill.cu; keep the two identical.
#include "kernels/api/fill.h"

#include "core/bf16.h"
#include "kernels/api/checks.h"
#if BEAMSERVE_CUDA
#include "kernels/cuda/fill.h"
#endif

namespace beam {
namespace {

using kernel_checks::cpu_pool;
using kernel_checks::cuda_backend_not_built;

// splitmix64 of (seed, i): 64 well-mixed bits per element.
uint64_t mix(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Four 16-bit uniforms in (0, 1) summed (Irwin–Hall, variance 4/12), centred and scaled to
// unit variance. The last one's offset of 1/4 step keeps the (exact) sum off 2.0: z is never 0.
float unit_normal(uint64_t bits) {
  float sum = 0.0f;
  for (int k = 0; k < 4; ++k)
    sum += (static_cast<float>((bits >> (16 * k)) & 0xFFFF) + (k == 3 ? 0.25f : 0.5f)) *
           (1.0f / 65536.0f);
  return (sum - 2.0f) * 1.7320508f;
}

void fill_cpu(ThreadPool& pool, const TensorView& t, uint64_t seed, float std, float mean) {
  const bool is_bf16 = t.dtype == DType::kBF16;
  pool.parallel_for(t.numel(), 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float v = mean + std * unit_normal(mix(seed, static_cast<uint64_t>(i)));
      if (is_bf16) {
        t.as<bf16>()[i] = to_bf16(v);
      } else {
        t.as<float>()[i] = v;
      }
    }
  });
}

}  // namespace

void fill_random(const KernelContext& ctx, const TensorView& t, uint64_t seed, float std,
                 float mean) {
  constexpr const char* op = "fill_random";
  BEAM_CHECK(t.device == ctx.device && (t.data != nullptr || t.numel() == 0))
      << op << ": tensor " << t.shape.str() << " is not on the context's device";
  BEAM_CHECK(t.dtype == DType::kBF16 || t.dtype == DType::kF32) << op << ": bf16 or f32 only";
  if (t.numel() == 0) return;
  switch (ctx.device) {
    case Device::kCpu:
      fill_cpu(cpu_pool(ctx, op), t, seed, std, mean);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::fill_random(*ctx.cuda, t, seed, std, mean);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

}  // namespace beam
