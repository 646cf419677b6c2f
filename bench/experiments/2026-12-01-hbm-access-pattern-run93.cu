// HBM streaming by access pattern, one 512-thread block per SM, each block an equal share of
// 160 KB units (16 rows x 10240 B, like a small-batch gate_up tile at K = 5120), ~128 KB in flight
// per SM in every mode:
//   0 linear: the block's bytes in order, 512 B per warp load instruction;
//   1 expert: warp w reads bytes [640 w, 640 w + 640) of each of the 16 rows, 64 B per row per
//     step (lane: row lane/4 and lane/4 + 8, 16 B at 16 (lane % 4)), 8 steps in flight
//     (moe_small_batch.cuh's copies);
//   2 rows: warp w reads row w of the unit whole, 512 B per instruction;
//   3 expert with the .L2::256B prefetch hint the kernel's cp.async copies carry;
//   4 interleaved: as 3, but warp w reads the 64-byte steps w, w + 16, ... of each row, so at
//     each step the block's warps read 1 KB runs of the 16 rows.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>

constexpr int kRowBytes = 10240, kUnitBytes = 16 * kRowBytes;

__device__ __forceinline__ uint4 ld(const char* p) { return __ldcg(reinterpret_cast<const uint4*>(p)); }
// 16 B through L2 only, asking L2 to fetch the 256-byte block around it (cp.async's .L2::256B).
__device__ __forceinline__ uint4 ld256(const char* p) {
  uint4 v;
  asm volatile("ld.global.cg.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

template <int kMode>
__global__ void __launch_bounds__(512, 1) stream(const char* __restrict__ buf, int units_per_block,
                                                 int rot, uint4* sink) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const char* base = buf + size_t((blockIdx.x + rot) % gridDim.x) * units_per_block * kUnitBytes;
  uint4 acc = make_uint4(0, 0, 0, 0);
  auto mix = [&](uint4 v) { acc.x ^= v.x; acc.y ^= v.y; acc.z ^= v.z; acc.w ^= v.w; };
  if constexpr (kMode == 0) {
    const size_t n16 = size_t(units_per_block) * kUnitBytes / 16;
    for (size_t i = threadIdx.x; i < n16; i += 512 * 16) {
      uint4 v[16];
#pragma unroll
      for (int u = 0; u < 16; ++u) v[u] = i + u * 512 < n16 ? ld(base + (i + u * 512) * 16) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int u = 0; u < 16; ++u) mix(v[u]);
    }
  } else if constexpr (kMode == 1 || kMode == 3 || kMode == 4) {
    const int r = lane / 4, q = lane % 4;
    const int steps = units_per_block * 10;  // 10 steps of 64 B per row per unit per warp
    for (int s0 = 0; s0 < steps; s0 += 8) {
      uint4 v[8][2];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int s = s0 + u;
        const int col = kMode == 4 ? (warp + 16 * (s % 10)) * 64 : warp * 640 + (s % 10) * 64;
        const char* a = base + size_t(s / 10) * kUnitBytes + size_t(r) * kRowBytes + col + q * 16;
        if constexpr (kMode == 1) {
          v[u][0] = s < steps ? ld(a) : make_uint4(0, 0, 0, 0);
          v[u][1] = s < steps ? ld(a + 8 * kRowBytes) : make_uint4(0, 0, 0, 0);
        } else {
          v[u][0] = s < steps ? ld256(a) : make_uint4(0, 0, 0, 0);
          v[u][1] = s < steps ? ld256(a + 8 * kRowBytes) : make_uint4(0, 0, 0, 0);
        }
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) { mix(v[u][0]); mix(v[u][1]); }
    }
  } else {
    const int steps = units_per_block * (kRowBytes / 512);  // 20 per unit
    for (int s0 = 0; s0 < steps; s0 += 16) {
      uint4 v[16];
#pragma unroll
      for (int u = 0; u < 16; ++u) {
        const int s = s0 + u;
        const char* a = base + size_t(s / 20) * kUnitBytes + size_t(warp) * kRowBytes + (s % 20) * 512 + lane * 16;
        v[u] = s < steps ? ld(a) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < 16; ++u) mix(v[u]);
    }
  }
  if (acc.x == 0x9e3779b9u && acc.y == 0x7f4a7c15u) sink[threadIdx.x] = acc;
}

template <int kMode>
float time_mode(const char* buf, int n, int upb, uint4* sink, int iters) {
  cudaEvent_t a, b;
  cudaEventCreate(&a); cudaEventCreate(&b);
  stream<kMode><<<n, 512>>>(buf, upb, 0, sink);
  std::vector<float> ms;
  for (int i = 0; i < iters; ++i) {
    cudaEventRecord(a);
    stream<kMode><<<n, 512>>>(buf, upb, i + 1, sink);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float t; cudaEventElapsedTime(&t, a, b); ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int main() {
  cudaDeviceProp prop; cudaGetDeviceProperties(&prop, 0);
  const int n = prop.multiProcessorCount;
  char* buf; uint4* sink;
  const int max_upb = 40;
  cudaMalloc(&buf, size_t(n) * max_upb * kUnitBytes);
  cudaMemset(buf, 1, size_t(n) * max_upb * kUnitBytes);
  cudaMalloc(&sink, 512 * 16);
  printf("{\"sms\": %d, \"rows\": [\n", n);
  for (int upb : {20, 40}) {
    const double bytes = double(n) * upb * kUnitBytes;
    float t0 = time_mode<0>(buf, n, upb, sink, 30), t1 = time_mode<1>(buf, n, upb, sink, 30), t2 = time_mode<2>(buf, n, upb, sink, 30), t3 = time_mode<3>(buf, n, upb, sink, 30), t4 = time_mode<4>(buf, n, upb, sink, 30);
    printf(" {\"units_per_block\": %d, \"MB\": %.1f, \"linear_us\": %.2f, \"linear_TBps\": %.3f, \"expert_us\": %.2f, \"expert_TBps\": %.3f, \"rows_us\": %.2f, \"rows_TBps\": %.3f, \"expert_l2_256B_us\": %.2f, \"expert_l2_256B_TBps\": %.3f, \"interleaved_us\": %.2f, \"interleaved_TBps\": %.3f}%s\n",
           upb, bytes / 1e6, t0 * 1e3, bytes / t0 / 1e9, t1 * 1e3, bytes / t1 / 1e9, t2 * 1e3, bytes / t2 / 1e9, t3 * 1e3, bytes / t3 / 1e9, t4 * 1e3, bytes / t4 / 1e9, upb == 40 ? "" : ",");
  }
  printf("]}\n");
  return 0;
}
