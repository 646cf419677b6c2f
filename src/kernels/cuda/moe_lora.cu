// The routed experts' LoRA shrink (moe_lora.cuh): one block per routed slot; its input row is
// staged in shared memory as fp32, then each warp takes (part, j) pairs in turn, its lanes
// striding the row (8 elements a 16-byte load where the width allows), and sums the lanes by a
// fixed butterfly, so the result does not depend on the batch or the run.
#include "kernels/cuda/check.h"
#include "kernels/cuda/moe_lora.cuh"

namespace beam::cuda::moe_lora {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxParts = 2;

struct ShrinkArgs {
  const bf16_t* in;
  const int32_t* in_row_of;
  int64_t k;
  const bf16_t* a[kMaxParts];     // [E, S, r, k]
  const float* scale[kMaxParts];  // [S]
  int parts, num_slots, rank, top_k;
  const int32_t* slots;
  const int32_t* ids;
  float* h;
  bool vector_loads;  // k % 8 == 0 and every A row 16-byte aligned
};

__global__ void __launch_bounds__(kThreads) shrink_kernel(const ShrinkArgs p) {
  extern __shared__ float row[];  // [k] the input row in fp32
  const int64_t i = blockIdx.x;
  const int t = static_cast<int>(i / p.top_k), e = p.ids[i], s = p.slots[t];
  if (e < 0 || s < 0) return;
  const int64_t src = p.in_row_of ? p.in_row_of[i] : t;
  const bf16_t* in = p.in + src * p.k;
  for (int64_t c = threadIdx.x; c < p.k; c += kThreads) row[c] = __bfloat162float(in[c]);
  __syncthreads();
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  for (int q = warp; q < p.parts * p.rank; q += kWarps) {
    const int part = q / p.rank, j = q % p.rank;
    // (selects, not p.a[part]: a dynamic index into the parameters copies them to the stack)
    const bf16_t* a = (part == 0 ? p.a[0] : p.a[1]) +
                      ((static_cast<int64_t>(e) * p.num_slots + s) * p.rank + j) * p.k;
    float acc = 0.0f;
    if (p.vector_loads) {
      for (int64_t c = 8 * lane; c < p.k; c += 8 * 32) acc = fma8(row + c, a + c, acc);
    } else {
      for (int64_t c = lane; c < p.k; c += 32) acc = __fmaf_rn(row[c], __bfloat162float(a[c]), acc);
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0)
      p.h[i * p.parts * p.rank + q] = __fmul_rn((part == 0 ? p.scale[0] : p.scale[1])[s], acc);
  }
}

}  // namespace

void launch_shrink(CudaContext& ctx, const bf16_t* in, const int32_t* in_row_of, int64_t k,
                   const ExpertLoraStack* const* parts, int num_parts, const int32_t* slots,
                   const int32_t* ids, int64_t num_rows, int top_k, float* h) {
  BEAM_CHECK(num_parts >= 1 && num_parts <= kMaxParts) << "moe_lora: " << num_parts << " parts";
  ShrinkArgs p{};
  p.in = in;
  p.in_row_of = in_row_of;
  p.k = k;
  p.parts = num_parts;
  p.num_slots = static_cast<int>(parts[0]->a.dim(1));
  p.rank = static_cast<int>(parts[0]->a.dim(2));
  p.top_k = top_k;
  p.slots = slots;
  p.ids = ids;
  p.h = h;
  p.vector_loads = k % 8 == 0;
  for (int i = 0; i < num_parts; ++i) {
    p.a[i] = static_cast<const bf16_t*>(parts[i]->a.data);
    p.scale[i] = parts[i]->scale.as<float>();
    p.vector_loads = p.vector_loads && reinterpret_cast<uintptr_t>(p.a[i]) % 16 == 0;
  }
  if (num_rows == 0 || p.rank == 0) return;
  const size_t smem = static_cast<size_t>(k) * sizeof(float);
  BEAM_CHECK(smem <= 160 * 1024) << "moe_lora: input width " << k << " past the shrink's staging";
  if (smem > 48 * 1024)
    CUDA_OK(cudaFuncSetAttribute(shrink_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(smem)));
  shrink_kernel<<<static_cast<unsigned>(num_rows), kThreads, smem, ctx.stream>>>(p);
  CUDA_LAUNCH_OK();
}

}  // namespace beam::cuda::moe_lora
