// Row-wide weighted radix selection over a row's 64-bit rank keys (sampling_math.cuh): finds the
// first token in rank order at which the cumulative integer weight reaches `need`. With weight 1
// it is top-k (the k-th ranked token); with fixed-point probability weights it is top-p's nucleus
// end or the inverse-CDF draw. Eight-bit digits from the top; it stops as soon as the bucket
// holding the crossing has one token, so distinct values need 2–4 passes over the row, not a sort.
// Each block of the row's cluster counts its slice (a warp adds one shared atomic per distinct
// bucket among its lanes: logits crowd into a few exponent buckets), then every block sums the
// cluster's histograms and makes the same choice.
#pragma once

#include "kernels/cuda/sampling_cluster.cuh"

namespace beam::cuda::sampling_detail {

constexpr int kDigitBits = 8;
constexpr int kBuckets = 1 << kDigitBits;

// What an Item functor returns for token i of value v (Item::kUnitWeights: every weight is 1).
struct SelectItem {
  bool candidate;            // takes part in the selection
  unsigned long long key;    // rank_key: unique, larger ranks first
  unsigned long long weight;
};

struct Histogram {
  unsigned long long mass[kBuckets];
  unsigned int count[kBuckets];
};

struct SelectShared {
  Histogram local[2];  // this block's slice, by digit parity (peers may still read the other one)
  Histogram total;     // the cluster's sum (choose_digit reads it)
  unsigned long long found;         // kFind: the one matching key in this block's slice, else 0
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

// Processed logit rank order over a row (NaN never takes part), weight 1: top-k and top-n.
struct LogitRankItem {
  static constexpr bool kUnitWeights = true;
  __device__ SelectItem operator()(int i, float v) const {
    return {!isnan(v), rank_key(order_bits(v), i), 1ull};
  }
};

// Thread 0: picks the digit of the total's bucket holding the crossing (scanning in rank order).
// When `need` is out of reach (it never is for callers that clamp it to the total), takes the
// last-ranked bucket with weight, i.e. the last-ranked token with weight, as the CPU does.
__device__ inline void choose_digit(SelectShared& s, int shift, unsigned long long need) {
  unsigned long long before = s.before;
  int chosen = -1, last_weighted = -1;
  unsigned long long before_last = 0;
  for (int d = kBuckets - 1; d >= 0; --d) {
    if (s.total.count[d] == 0) continue;
    if (s.total.mass[d] > 0) {
      last_weighted = d;
      before_last = before;
    }
    if (before + s.total.mass[d] >= need && s.total.mass[d] > 0) {
      chosen = d;
      break;
    }
    before += s.total.mass[d];
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
  s.through = before + s.total.mass[chosen];
  if (shift == 0) {
    s.key = s.prefix;
    s.state = kDone;
  } else if (s.total.count[chosen] == 1) {
    s.state = kFind;
  }
}

// Adds the lanes with `take` to bucket d of h (weight w each), one shared atomic per distinct
// bucket among the warp's lanes. Called by all 32 lanes of the warp.
template <bool kUnitWeights>
__device__ __forceinline__ void warp_add(Histogram& h, bool take, int d, unsigned long long w) {
  const unsigned takers = __ballot_sync(0xFFFFFFFFu, take);
  if (!take) return;
  const unsigned peers = __match_any_sync(takers, d);
  const unsigned count = __popc(peers);
  unsigned long long mass = count;
  if constexpr (!kUnitWeights) {  // 22 / 22 / 20-bit parts: 32 lanes' sums stay below 2^27
    constexpr unsigned long long kPart = (1ull << 22) - 1;
    const unsigned lo = __reduce_add_sync(peers, static_cast<unsigned>(w & kPart));
    const unsigned mid = __reduce_add_sync(peers, static_cast<unsigned>((w >> 22) & kPart));
    const unsigned hi = __reduce_add_sync(peers, static_cast<unsigned>(w >> 44));
    mass = lo + (static_cast<unsigned long long>(mid) << 22) +
           (static_cast<unsigned long long>(hi) << 44);
  }
  if ((threadIdx.x & 31) != __ffs(peers) - 1) return;
  if (mass != 0) atomicAdd(&h.mass[d], mass);
  atomicAdd(&h.count[d], count);
}

// Zeroes this block's histogram h (the caller syncs before counting into it).
__device__ __forceinline__ void clear(Histogram& h) {
  for (int b = static_cast<int>(threadIdx.x); b < kBuckets; b += kThreads) {
    h.mass[b] = 0;
    h.count[b] = 0;
  }
}

// total = the sum of every block's `local` (each block's copy of it), once all are complete.
// Called by every thread of the cluster; every thread may read total after it.
__device__ __forceinline__ void sum_histograms(const Histogram& local, Histogram& total) {
  cluster::sync();  // every block's histogram is complete
  for (int b = static_cast<int>(threadIdx.x); b < kBuckets; b += kThreads) {
    unsigned long long mass = 0;
    unsigned int count = 0;
    for (uint32_t r = 0; r < kClusterBlocks; ++r) {
      mass += cluster::load_u64(cluster::map(&local.mass[b], r));
      count += cluster::load_u32(cluster::map(&local.count[b], r));
    }
    total.mass[b] = mass;
    total.count[b] = count;
  }
  __syncthreads();
}

// Called by every thread of the row's cluster with the same arguments; src[i] is token i's value
// and item(i, src[i]) its SelectItem, for the tokens of this block's slice. top_digit_counted:
// s.local[0] and s.total already hold the first pass's histograms (the caller counted every
// candidate's top digit in an earlier sweep), so the selection starts at the second digit.
template <typename Item>
__device__ SelectResult radix_select(const float* src, Slice slice, const Item& item,
                                     unsigned long long need, SelectShared& s,
                                     bool top_digit_counted = false) {
  const int tid = threadIdx.x;
  if (tid == 0) {
    s.prefix = s.mask = s.before = s.through = s.key = s.found = 0;
    s.state = kSearching;
  }
  int parity = 0;
  for (int shift = 64 - kDigitBits; shift >= 0; shift -= kDigitBits, parity ^= 1) {
    if (!top_digit_counted || shift != 64 - kDigitBits) {
      Histogram& h = s.local[parity];
      clear(h);
      __syncthreads();
      const unsigned long long prefix = s.prefix, mask = s.mask;
      sweep(src, slice, [&](int i, float v, bool valid) {
        const SelectItem c = valid ? item(i, v) : SelectItem{false, 0ull, 0ull};
        const bool take = c.candidate && (c.key & mask) == prefix;
        warp_add<Item::kUnitWeights>(h, take, static_cast<int>((c.key >> shift) & (kBuckets - 1)),
                                     c.weight);
      });
      sum_histograms(h, s.total);
    }
    if (tid == 0) choose_digit(s, shift, need);
    __syncthreads();
    if (s.state != kSearching) break;
  }
  unsigned long long key = s.key;
  if (s.state == kFind) {  // exactly one token of the row matches: its block records it
    const unsigned long long prefix = s.prefix, mask = s.mask;
    sweep(src, slice, [&](int i, float v, bool valid) {
      if (!valid) return;
      const SelectItem c = item(i, v);
      if (c.candidate && (c.key & mask) == prefix) s.found = c.key;
    });
    cluster::sync();
    key = 0;  // rank keys are never 0
    for (uint32_t r = 0; r < kClusterBlocks; ++r)
      key = max(key, static_cast<unsigned long long>(cluster::load_u64(cluster::map(&s.found, r))));
  }
  const SelectResult out{s.state != kNone, key, s.through};
  cluster::sync();  // s may be reused by the next selection; peers are done reading it
  return out;
}

}  // namespace beam::cuda::sampling_detail
