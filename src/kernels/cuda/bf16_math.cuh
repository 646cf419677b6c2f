// Device helpers shared by the CUDA kernels: bf16 <-> fp32 conversions with the CPU reference's
// round-to-nearest-even (core/bf16.h), 16-byte packs of 8 bf16 values, and fp32 warp/block sums.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace beam::cuda {

using bf16_t = __nv_bfloat16;

// Widening is exact; narrowing rounds to nearest even (cvt.rn.bf16.f32), as core/bf16.h's to_bf16.
__device__ __forceinline__ float to_f32(bf16_t v) { return __bfloat162float(v); }
__device__ __forceinline__ bf16_t to_bf16_rn(float v) { return __float2bfloat16_rn(v); }
// bf16(x) in BEAM.md's notation: rounded to bf16 and widened back.
__device__ __forceinline__ float round_bf16(float v) { return to_f32(to_bf16_rn(v)); }

// N consecutive values widened to fp32. N == 8 is one 16-byte access (address 16-byte aligned);
// N == 1 is the scalar fallback for odd widths or unaligned views.
template <int N>
struct Pack {
  float v[N];
};

template <int N>
__device__ __forceinline__ Pack<N> load_bf16(const bf16_t* p) {
  static_assert(N == 1 || N == 8, "packs of 1 or 8 bf16 values");
  Pack<N> out;
  if constexpr (N == 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __bfloat1622float2(h[i]);
      out.v[2 * i] = f.x;
      out.v[2 * i + 1] = f.y;
    }
  } else {
    out.v[0] = to_f32(*p);
  }
  return out;
}

// Rounds each value to bf16 (nearest even) and stores the pack.
template <int N>
__device__ __forceinline__ void store_bf16(bf16_t* p, const Pack<N>& in) {
  static_assert(N == 1 || N == 8, "packs of 1 or 8 bf16 values");
  if constexpr (N == 8) {
    uint4 raw;
    bf16_t* h = reinterpret_cast<bf16_t*>(&raw);
#pragma unroll
    for (int i = 0; i < 8; ++i) h[i] = to_bf16_rn(in.v[i]);
    *reinterpret_cast<uint4*>(p) = raw;
  } else {
    *p = to_bf16_rn(in.v[0]);
  }
}

// True when every pointer is 16-byte aligned (host side: picks the 8-wide path).
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
template <typename... P>
inline bool all_aligned16(const P*... p) {
  return (aligned16(p) && ...);
}

// Sum over the 32 lanes of a warp; every lane gets the total.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024); every thread gets the
// total. Contains __syncthreads: every thread of the block must call it.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int num_warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < num_warps ? partial[lane] : 0.0f;
  return warp_sum(v);
}

}  // namespace beam::cuda
