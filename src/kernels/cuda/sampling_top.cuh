// The top-n rank keys of a row (the logprobs' alternatives) without a radix select: n warps of
// the row's cluster each hold a key at least the n-th largest of the warps' maxima, so the row's
// n-th key is at least that threshold, and the keys at or above it (usually little more than n)
// are gathered and ranked in rank 0's block. The thread maxima come from a sweep the caller
// already makes (the logprobs' sums), so this costs one sweep of the row, where the radix select
// took two to five with a shared-atomic histogram each. Rows with more candidates than the
// blocks' buffers hold (long runs of equal values) report an overflow; the caller then selects.
#pragma once

#include "kernels/cuda/sampling_cluster.cuh"

namespace beam::cuda::sampling_detail {

constexpr int kCandidatesPerBlock = 64;
constexpr int kRowWarps = kWarps * kClusterBlocks;
static_assert(kCandidatesPerBlock * kClusterBlocks <= kThreads && kRowWarps <= kThreads,
              "rank 0 gathers a candidate, and each block a warp maximum, per thread");

struct ThresholdShared {
  unsigned long long warp_max[kWarps];   // this block's warps' largest keys (0: none)
  unsigned long long maxima[kRowWarps];  // the cluster's warp maxima, gathered
  unsigned long long threshold;          // keys >= it are candidates
  int count;                             // this block's candidates (may exceed the buffer)
  unsigned long long candidates[kCandidatesPerBlock];
  unsigned long long gathered[kCandidatesPerBlock * kClusterBlocks];  // rank 0: every block's
};

// The rank key of token i of value v for the alternatives (0 for NaN, which never takes part;
// rank keys are never 0 otherwise).
__device__ __forceinline__ unsigned long long alternative_key(int i, float v) {
  return isnan(v) ? 0ull : rank_key(order_bits(v), i);
}

// The largest of the warp's keys, in every lane.
__device__ __forceinline__ unsigned long long warp_max(unsigned long long key) {
  for (int off = 16; off > 0; off >>= 1) key = max(key, __shfl_xor_sync(0xFFFFFFFFu, key, off));
  return key;
}

// The n-th largest of the cluster's warp maxima (1, i.e. every key, when fewer than n warps hold
// one) from each thread's largest key. Every thread of the cluster gets it; it also zeroes the
// block's candidate count.
__device__ unsigned long long row_threshold(unsigned long long thread_max, int n,
                                            ThresholdShared& t) {
  const unsigned long long mine = warp_max(thread_max);
  if ((threadIdx.x & 31) == 0) t.warp_max[threadIdx.x / 32] = mine;
  if (threadIdx.x == 0) {
    t.threshold = 1;
    t.count = 0;
  }
  cluster::sync();  // every block's maxima are written
  const int j = static_cast<int>(threadIdx.x);
  if (j < kRowWarps)
    t.maxima[j] =
        cluster::load_u64(cluster::map(&t.warp_max[j % kWarps], static_cast<uint32_t>(j / kWarps)));
  __syncthreads();
  if (j < kRowWarps && t.maxima[j] != 0) {
    int above = 0;  // keys are unique, so exactly one warp maximum has n - 1 above it
    for (int k = 0; k < kRowWarps; ++k) above += t.maxima[k] > t.maxima[j] ? 1 : 0;
    if (above == n - 1) t.threshold = t.maxima[j];
  }
  __syncthreads();
  return t.threshold;
}

// Whether some block's candidates overflowed its buffer (the same answer in every thread of the
// cluster). When none did, rank 0's keys[0, *count) hold the row's top min(n, candidates) keys
// in rank order; otherwise keys and count are untouched. thread_max: the largest alternative_key
// among the values this thread reads in a sweep of `slice`.
__device__ bool top_keys_by_threshold(const float* raw, Slice slice, int n,
                                      unsigned long long thread_max, ThresholdShared& t,
                                      unsigned long long* keys, int* count) {
  const unsigned long long threshold = row_threshold(thread_max, n, t);
  sweep(raw, slice, [&](int i, float v, bool valid) {
    const unsigned long long key = valid ? alternative_key(i, v) : 0ull;
    if (key < threshold) return;
    const int slot = atomicAdd(&t.count, 1);
    if (slot < kCandidatesPerBlock) t.candidates[slot] = key;
  });
  cluster::sync();  // every block's candidates are collected
  int counts[kClusterBlocks];
  int total = 0;
  bool overflow = false;
  for (uint32_t r = 0; r < kClusterBlocks; ++r) {
    counts[r] = static_cast<int>(cluster::load_u32(cluster::map(&t.count, r)));
    overflow = overflow || counts[r] > kCandidatesPerBlock;
    total += counts[r];
  }
  if (!overflow && cluster::rank() == 0) {
    const int j = static_cast<int>(threadIdx.x);
    for (int r = 0, first = 0; r < kClusterBlocks; first += counts[r], ++r)
      if (j >= first && j < first + counts[r])
        t.gathered[j] =
            cluster::load_u64(cluster::map(&t.candidates[j - first], static_cast<uint32_t>(r)));
    __syncthreads();
    for (int c = j; c < total; c += kThreads) {
      int above = 0;
      for (int k = 0; k < total; ++k) above += t.gathered[k] > t.gathered[c] ? 1 : 0;
      if (above < n) keys[above] = t.gathered[c];
    }
    if (j == 0) *count = min(total, n);
    __syncthreads();
  }
  cluster::sync();  // no block reuses its buffers while rank 0 still reads them
  return overflow;
}

}  // namespace beam::cuda::sampling_detail
