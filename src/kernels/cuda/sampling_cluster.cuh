// How the sampling kernels split a row over a thread-block cluster: kClusterBlocks blocks, each
// owning one contiguous slice of the row; sweeps over a slice that keep kUnroll loads in flight per
// thread; and row-wide sums and argmax (each block's total, then the blocks in rank order, so a
// row's result depends only on its values, never on the batch or the launch).
#pragma once

#include <cstring>

#include "kernels/cuda/cluster.cuh"
#include "kernels/cuda/sampling_math.cuh"

namespace beam::cuda::sampling_detail {

constexpr int kClusterBlocks = 8;  // blocks per row: the portable cluster maximum
constexpr int kUnroll = 4;         // loads a thread issues before using them, in a sweep

// Token range [begin, end) of a row that one block of its cluster owns (may be empty).
struct Slice {
  int begin;
  int end;
};

// This block's slice of an n-token row: [r·c, (r + 1)·c) ∩ [0, n), c = ceil(n / kClusterBlocks).
__device__ __forceinline__ Slice row_slice(int n) {
  const int chunk = (n + kClusterBlocks - 1) / kClusterBlocks;
  const int begin = min(n, static_cast<int>(cluster::rank()) * chunk);
  return {begin, min(n, begin + chunk)};
}

// Calls f(i, src[i], true) for each i of slice s, and f(i, 0, false) for lanes past its end, so
// every lane of a warp makes the same calls (f may use warp collectives over the full warp). Each
// thread loads kUnroll values before it uses them.
template <typename F>
__device__ __forceinline__ void sweep(const float* src, Slice s, F&& f) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  for (int base = s.begin + (static_cast<int>(threadIdx.x) - lane); base < s.end;
       base += kUnroll * kThreads) {
    float v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = base + lane + u * kThreads;
      v[u] = i < s.end ? src[i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = base + lane + u * kThreads;
      f(i, v[u], i < s.end);
    }
  }
}

// The cluster-wide combination of v, which every thread of each block holds: f over the blocks'
// values in rank order; every thread of the cluster gets it. `slot` is this block's shared word
// for the exchange. Called by every thread of the cluster.
template <typename T, typename Combine>
__device__ T cluster_combine(T v, unsigned long long& slot, Combine f) {
  static_assert(sizeof(T) == sizeof(unsigned long long));
  if (threadIdx.x == 0) memcpy(&slot, &v, sizeof(T));
  cluster::sync();
  const auto value_of = [&](uint32_t r) {
    const unsigned long long bits = cluster::load_u64(cluster::map(&slot, r));
    T x;
    memcpy(&x, &bits, sizeof(T));
    return x;
  };
  T acc = value_of(0);
  for (uint32_t r = 1; r < kClusterBlocks; ++r) acc = f(acc, value_of(r));
  cluster::sync();  // no block rewrites its slot while another still reads it
  return acc;
}

// Row-wide sums and argmax of every thread's x (per block: the fixed shuffle trees of
// sampling_math.cuh). Called by every thread of the cluster; every thread gets the result.
__device__ __forceinline__ double row_sum(double x, ReduceShared& s) {
  return cluster_combine(block_sum(x, s), s.slot, [](double a, double b) { return a + b; });
}
__device__ __forceinline__ unsigned long long row_sum(unsigned long long x, ReduceShared& s) {
  return cluster_combine(block_sum(x, s), s.slot,
                         [](unsigned long long a, unsigned long long b) { return a + b; });
}
__device__ __forceinline__ ValueId row_best(ValueId x, ReduceShared& s) {
  return cluster_combine(block_best(x, s), s.slot,
                         [](ValueId a, ValueId b) { return better(a, b); });
}

}  // namespace beam::cuda::sampling_detail
