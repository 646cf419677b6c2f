// Device helpers of the sampling kernel: the CPU sampler's exp (runtime/sampling/fast_exp.h,
// operation for operation, with _rn intrinsics so nvcc never contracts them into FMAs), the rank
// keys that order tokens like the CPU's ranks_before, and deterministic block reductions.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace beam::cuda::sampling_detail {

constexpr int kThreads = 512;  // per block (sampling_cluster.cuh: a cluster of blocks per row)
constexpr int kWarps = kThreads / 32;

// e^x for x <= 0, 0 below ln(2^-126) and for NaN: bit-identical to exp_nonpositive (fast_exp.h).
__device__ __forceinline__ float exp_nonpositive(float x) {
  constexpr float kMinArg = -87.33654f;
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRoundMagic = 12582912.0f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                              4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
  if (!(x >= kMinArg)) return 0.0f;
  const float shifted = __fadd_rn(__fmul_rn(x, kLog2e), kRoundMagic);
  const float n = __fsub_rn(shifted, kRoundMagic);
  const int n_int = __float_as_int(shifted) - __float_as_int(kRoundMagic);
  const float r = __fsub_rn(__fsub_rn(x, __fmul_rn(n, kLn2Hi)), __fmul_rn(n, kLn2Lo));
  float p = kPoly[0];
#pragma unroll
  for (int k = 1; k < 6; ++k) p = __fadd_rn(__fmul_rn(p, r), kPoly[k]);
  p = __fadd_rn(__fadd_rn(__fmul_rn(__fmul_rn(p, r), r), r), 1.0f);
  return __int_as_float(__float_as_int(p) + n_int * (1 << 23));
}

// exp((v - max) * inv_t) with the CPU's f32 operations.
__device__ __forceinline__ float weight_of(float v, float max, float inv_t) {
  return exp_nonpositive(__fmul_rn(__fsub_rn(v, max), inv_t));
}

// Order-preserving bits of a float (larger value → larger bits; -0 and +0 equal).
__device__ __forceinline__ uint32_t order_bits(float v) {
  if (v == 0.0f) v = 0.0f;
  const uint32_t b = __float_as_uint(v);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// A unique 64-bit key per token whose descending order is the CPU's rank order: larger value
// first, equal values → lower token id.
__device__ __forceinline__ unsigned long long rank_key(uint32_t value_bits, int id) {
  return (static_cast<unsigned long long>(value_bits) << 32) |
         static_cast<unsigned long long>(0xFFFFFFFFu - static_cast<uint32_t>(id));
}
__device__ __forceinline__ int id_of_key(unsigned long long key) {
  return static_cast<int>(0xFFFFFFFFu - static_cast<uint32_t>(key));
}

// Weights as fixed point (2^44 per unit weight): integer sums are exact and order-independent,
// and a row of 2^18 weights <= 1 stays below 2^63.
constexpr float kFixedScale = 17592186044416.0f;  // 2^44
__device__ __forceinline__ unsigned long long fixed_weight(float w) {
  return __float2ull_rn(__fmul_rn(w, kFixedScale));
}

// A token and its value; `best` keeps the larger value, then the lower id.
struct ValueId {
  float value;
  int id;
};
__device__ __forceinline__ ValueId better(ValueId a, ValueId b) {
  return (b.value > a.value || (b.value == a.value && b.id < a.id)) ? b : a;
}

// Per-warp partials of the block reductions; `slot`: the block's total in row-wide ones
// (sampling_cluster.cuh).
struct ReduceShared {
  double d[kWarps];
  unsigned long long u[kWarps];
  ValueId v[kWarps];
  unsigned long long slot;
};

// Block-wide sums and argmax: a fixed shuffle tree per warp, then the warps in order, so the
// result (even of a double sum) depends only on the inputs. Every thread gets the result.
__device__ __forceinline__ double block_sum(double x, ReduceShared& s) {
  for (int off = 16; off > 0; off >>= 1) x += __shfl_down_sync(0xFFFFFFFFu, x, off);
  if ((threadIdx.x & 31) == 0) s.d[threadIdx.x / 32] = x;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kWarps; ++w) total += s.d[w];
  __syncthreads();
  return total;
}

__device__ __forceinline__ unsigned long long block_sum(unsigned long long x, ReduceShared& s) {
  for (int off = 16; off > 0; off >>= 1) x += __shfl_down_sync(0xFFFFFFFFu, x, off);
  if ((threadIdx.x & 31) == 0) s.u[threadIdx.x / 32] = x;
  __syncthreads();
  unsigned long long total = 0;
  for (int w = 0; w < kWarps; ++w) total += s.u[w];
  __syncthreads();
  return total;
}

__device__ __forceinline__ ValueId block_best(ValueId x, ReduceShared& s) {
  for (int off = 16; off > 0; off >>= 1) {
    ValueId o{__shfl_down_sync(0xFFFFFFFFu, x.value, off), __shfl_down_sync(0xFFFFFFFFu, x.id, off)};
    x = better(x, o);
  }
  if ((threadIdx.x & 31) == 0) s.v[threadIdx.x / 32] = x;
  __syncthreads();
  ValueId best = s.v[0];
  for (int w = 1; w < kWarps; ++w) best = better(best, s.v[w]);
  __syncthreads();
  return best;
}

}  // namespace beam::cuda::sampling_detail
