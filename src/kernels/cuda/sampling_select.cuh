// Block-wide weighted radix selection over a row's 64-bit rank keys (sampling_math.cuh): finds the
// first token in rank order at which the cumulative integer weight reaches `need`. With weight 1
// it is top-k (the k-th ranked token); with fixed-point probability weights it is top-p's nucleus
// end or the inverse-CDF draw. Eight-bit digits from the top; it stops as soon as the bucket
// holding the crossing has one token, so distinct values need 2–4 passes over the row, not a sort.
#pragma once

#include "kernels/cuda/sampling_math.cuh"

namespace beam::cuda::sampling_detail {

constexpr int kDigitBits = 8;
constexpr int kBuckets = 1 << kDigitBits;

// What an Item functor returns for token i.
struct SelectItem {
  bool candidate;            // takes part in the selection
  unsigned long long key;    // rank_key: unique, larger ranks first
  unsigned long long weight;
};

struct SelectShared {
  unsigned long long mass[kBuckets];
  unsigned int count[kBuckets];
  unsigned long long prefix, mask;  // the digits chosen so far, and their bits
  unsigned long long before;        // weight of the candidates ranking before the prefix's range
  unsigned long long through;       // before + the crossing token's weight (once found)
  unsigned long long key;           // the crossing token's key (once found)
  int state;                        // kSearching, kFind (one token left: find it), kDone, kNone
};
constexpr int kSearching = 0, kFind = 1, kDone = 2, kNone = 3;

struct SelectResult {
  bool found;                // false only when no candidate has weight (then key is meaningless)
  unsigned long long key;    // the crossing token's rank key
  unsigned long long through;  // cumulative weight up to and including it
};

// Thread 0: picks the digit of the bucket holding the crossing (scanning in rank order). When
// `need` is out of reach (it never is for callers that clamp it to the total), takes the
// last-ranked bucket with weight, i.e. the last-ranked token with weight, as the CPU does.
__device__ inline void choose_digit(SelectShared& s, int shift, unsigned long long need) {
  unsigned long long before = s.before;
  int chosen = -1, last_weighted = -1;
  unsigned long long before_last = 0;
  for (int d = kBuckets - 1; d >= 0; --d) {
    if (s.count[d] == 0) continue;
    if (s.mass[d] > 0) {
      last_weighted = d;
      before_last = before;
    }
    if (before + s.mass[d] >= need && s.mass[d] > 0) {
      chosen = d;
      break;
    }
    before += s.mass[d];
  }
  if (chosen < 0) {
    if (last_weighted < 0) {
      s.state = kNone;
      return;
    }
    chosen = last_weighted;
    before = before_last;
  }
  s.prefix |= static_cast<unsigned long long>(chosen) << shift;
  s.mask |= static_cast<unsigned long long>(kBuckets - 1) << shift;
  s.before = before;
  s.through = before + s.mass[chosen];
  if (shift == 0) {
    s.key = s.prefix;
    s.state = kDone;
  } else if (s.count[chosen] == 1) {
    s.state = kFind;
  }
}

// Called by every thread of the block with the same arguments; item(i) for i in [0, n).
template <typename Item>
__device__ SelectResult radix_select(int n, const Item& item, unsigned long long need,
                                     SelectShared& s) {
  const int tid = threadIdx.x;
  if (tid == 0) {
    s.prefix = s.mask = s.before = s.through = s.key = 0;
    s.state = kSearching;
  }
  for (int shift = 64 - kDigitBits; shift >= 0; shift -= kDigitBits) {
    for (int b = tid; b < kBuckets; b += kThreads) {
      s.mass[b] = 0;
      s.count[b] = 0;
    }
    __syncthreads();
    const unsigned long long prefix = s.prefix, mask = s.mask;
    for (int i = tid; i < n; i += kThreads) {
      const SelectItem c = item(i);
      if (!c.candidate || (c.key & mask) != prefix) continue;
      const int d = static_cast<int>((c.key >> shift) & (kBuckets - 1));
      if (c.weight != 0) atomicAdd(&s.mass[d], c.weight);
      atomicAdd(&s.count[d], 1u);
    }
    __syncthreads();
    if (tid == 0) choose_digit(s, shift, need);
    __syncthreads();
    if (s.state != kSearching) break;
  }
  if (s.state == kFind) {
    const unsigned long long prefix = s.prefix, mask = s.mask;
    for (int i = tid; i < n; i += kThreads) {
      const SelectItem c = item(i);
      if (c.candidate && (c.key & mask) == prefix) s.key = c.key;  // exactly one token matches
    }
    __syncthreads();
  }
  const SelectResult out{s.state != kNone, s.key, s.through};
  __syncthreads();  // s may be reused by the next selection
  return out;
}

}  // namespace beam::cuda::sampling_detail
