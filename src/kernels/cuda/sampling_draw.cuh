// The sampling kernel's draw on a processed row (docs/sampling.md): top-k → weights
// exp((v - max) / T) → top-p → min-p → inverse-CDF draw with the row's uniform, all on exact
// integer sums of 2^-44 fixed-point weights. The weights' sweep also counts them by their top key
// digit (a radix select's first pass). Every selection after it (top-p's nucleus end, min-p's cut,
// the draw) ends at or above the digit holding the first of them, so when that digit and the
// ones above hold at most kDrawCandidates tokens (a model's usual peaked rows) every block sends
// those tokens to rank 0, which sorts them in rank order, takes their prefix sums and answers all
// three selections from them: one more sweep of the row where the radix selects took four to ten.
// Flatter rows take the radix selects (sampling_select.cuh), the first of them starting from the
// counted digit. Both ways give the same token: they add the same integers in the same rank order.
#pragma once

#include "kernels/api/sampling.h"
#include "kernels/cuda/sampling_select.cuh"
#include "kernels/cuda/sampling_top.cuh"

namespace beam::cuda::sampling_detail {

constexpr int kDrawCandidates = 2 * kThreads;  // two per thread of rank 0's block

// Rank 0's candidate buffer.
struct CandidateShared {
  unsigned long long keys[kDrawCandidates];    // rank keys of the weights, then in rank order
  unsigned long long prefix[kDrawCandidates];  // inclusive sums of their fixed weights
  int index;                                   // first_index's answer
};

// The draw's plan and rank 0's answer.
struct DrawTally {
  unsigned long long kept;  // the fixed-point sum of the row's weights (top-k set)
  int digit;                // candidates: tokens whose weight's top key digit >= it; -1: selects
  unsigned int count;       // rank 0: candidates gathered so far (the caller zeroes it first)
  int token;                // rank 0: the drawn token
  int top_count;            // rank 0: the top-k keys its threshold ranked
};

// The shared state of the draw (select and threshold overlay each other).
struct DrawShared {
  SelectShared& select;
  ThresholdShared& threshold;
  CandidateShared& candidates;
  DrawTally& tally;
  ReduceShared& reduce;
};

// Weight rank order over the weights (-1 = outside top-k), restricted to keys >= min_key (the
// top-p nucleus) and weights >= min_p; weight = fixed-point probability weight.
struct WeightItem {
  static constexpr bool kUnitWeights = false;
  unsigned long long min_key;
  double min_p;
  __device__ SelectItem operator()(int i, float x) const {
    const unsigned long long key = rank_key(__float_as_uint(x), i);
    const bool in = x >= 0.0f && key >= min_key && static_cast<double>(x) >= min_p;
    return {in, key, in ? fixed_weight(x) : 0ull};
  }
};

// The top key digit of a weight's rank key (sign 0, then the exponent's high seven bits).
__device__ __forceinline__ int top_digit(float weight) {
  return static_cast<int>(__float_as_uint(weight) >> (32 - kDigitBits));
}

// The weight of a weight's rank key.
__device__ __forceinline__ float key_weight(unsigned long long key) {
  return __uint_as_float(static_cast<uint32_t>(key >> 32));
}

// Smallest integer weight N with "prefix >= N" ⟺ "prefix >= target" (at_least) or
// "prefix > target", clamped to [1, total].
__device__ inline unsigned long long need_for(double target, bool at_least,
                                              unsigned long long total) {
  const double n = at_least ? ceil(target) : floor(target) + 1.0;
  if (!(n >= 1.0)) return 1;
  if (n >= static_cast<double>(total)) return total;
  return static_cast<unsigned long long>(n);
}

// Writes the weights of src's slice to dst (-1 outside the top-k set; src may be dst) and counts
// them into this block's h by top digit, with their fixed-point weights.
__device__ inline void to_weights(const float* src, float* dst, Slice slice,
                                  unsigned long long topk_min_key, float max, float inv_t,
                                  Histogram& h) {
  clear(h);
  __syncthreads();
  sweep(src, slice, [&](int i, float v, bool valid) {
    const bool in =
        valid && (topk_min_key == 0 || (!isnan(v) && rank_key(order_bits(v), i) >= topk_min_key));
    const float w = in ? weight_of(v, max, inv_t) : -1.0f;
    if (valid) dst[i] = w;
    warp_add<false>(h, in, top_digit(w), in ? fixed_weight(w) : 0ull);
  });
}

// Warp 0: the plan from the cluster's digit totals. The lowest digit a selection can end in is
// top-p's crossing, else min-p's digit (every weight >= min_p is at or above it), else the
// draw's crossing; the candidates are the tokens at or above it, when they fit.
__device__ inline void plan_draw(const Histogram& total, const SamplingRowParams& p, DrawTally& t) {
  constexpr int kPerLane = kBuckets / 32;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  unsigned long long mass[kPerLane];
  unsigned int count[kPerLane];
  unsigned long long lane_mass = 0;
  unsigned int lane_count = 0;
  for (int k = 0; k < kPerLane; ++k) {
    mass[k] = total.mass[lane * kPerLane + k];
    count[k] = total.count[lane * kPerLane + k];
    lane_mass += mass[k];
    lane_count += count[k];
  }
  unsigned long long from_mass = lane_mass;  // sums over this lane's digits and the ones above
  unsigned int from_count = lane_count;
  for (int off = 1; off < 32; off <<= 1) {
    const unsigned long long m = __shfl_down_sync(0xFFFFFFFFu, from_mass, off);
    const unsigned int c = __shfl_down_sync(0xFFFFFFFFu, from_count, off);
    if (lane + off < 32) {
      from_mass += m;
      from_count += c;
    }
  }
  const unsigned long long kept = __shfl_sync(0xFFFFFFFFu, from_mass, 0);
  // The digit: min-p's, or the highest whose sum with the ones above reaches need.
  int digit = -1;
  if (p.top_p >= 1.0 && p.min_p > 0.0) {
    digit = top_digit(__double2float_rz(p.min_p));
  } else {
    const unsigned long long need =
        p.top_p < 1.0 ? need_for(p.top_p * static_cast<double>(kept), true, kept)
                      : need_for(p.uniform * static_cast<double>(kept), false, kept);
    const unsigned reached = __ballot_sync(0xFFFFFFFFu, from_mass >= need);
    const int owner = reached == 0 ? -1 : 31 - __clz(static_cast<int>(reached));
    int mine = -1;
    if (lane == owner) {
      unsigned long long sum = from_mass - lane_mass;
      for (int k = kPerLane - 1; k >= 0 && mine < 0; --k)
        if ((sum += mass[k]) >= need) mine = lane * kPerLane + k;
    }
    digit = owner < 0 ? -1 : __shfl_sync(0xFFFFFFFFu, mine, owner);
  }
  // The tokens at or above the digit.
  unsigned int at_or_above = 0;
  const int owner = digit < 0 ? 0 : digit / kPerLane;
  if (lane == owner && digit >= 0) {
    at_or_above = from_count - lane_count;
    for (int k = digit % kPerLane; k < kPerLane; ++k) at_or_above += count[k];
  }
  at_or_above = __shfl_sync(0xFFFFFFFFu, at_or_above, owner);
  if (lane == 0) {
    t.kept = kept;
    t.digit = digit >= 0 && at_or_above <= kDrawCandidates ? digit : -1;
  }
}

// Every block: the weights of its slice whose top digit is >= digit, as rank keys, into rank 0's
// candidates (count: rank 0's tally's, zero before).
__device__ inline void gather_candidates(const float* row, Slice slice, int digit,
                                         CandidateShared& c, unsigned int& count) {
  const uint32_t count_at = cluster::map(&count, 0);
  const unsigned lane = threadIdx.x & 31;
  sweep(row, slice, [&](int i, float x, bool valid) {
    const bool take = valid && x >= 0.0f && top_digit(x) >= digit;
    const unsigned takers = __ballot_sync(0xFFFFFFFFu, take);
    if (takers == 0) return;
    const int leader = __ffs(static_cast<int>(takers)) - 1;
    unsigned base = 0;
    if (static_cast<int>(lane) == leader) base = cluster::atomic_add(count_at, __popc(takers));
    base = __shfl_sync(0xFFFFFFFFu, base, leader);
    if (!take) return;
    const unsigned slot = base + __popc(takers & ((1u << lane) - 1u));
    cluster::store_u64(cluster::map(&c.keys[slot], 0), rank_key(__float_as_uint(x), i));
  });
}

// Sorts keys[0, n) in descending order (n <= kDrawCandidates): a bitonic sort over the next power
// of two, padded with 0 (rank keys are never 0). Called by every thread of the block.
__device__ inline void sort_descending(unsigned long long* keys, int n) {
  int size = 1;
  while (size < n) size <<= 1;
  for (int j = n + static_cast<int>(threadIdx.x); j < size; j += kThreads) keys[j] = 0;
  __syncthreads();
  for (int k = 2; k <= size; k <<= 1)
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = static_cast<int>(threadIdx.x); i < size; i += kThreads) {
        const int partner = i ^ j;
        if (partner <= i) continue;
        const unsigned long long a = keys[i], b = keys[partner];
        if ((i & k) == 0 ? a < b : a > b) {
          keys[i] = b;
          keys[partner] = a;
        }
      }
      __syncthreads();
    }
}

// prefix[j] = the fixed-point weights of keys[0..j] summed, j < n. Called by every thread.
__device__ inline void prefix_weights(const unsigned long long* keys, unsigned long long* prefix,
                                      int n, ReduceShared& s) {
  static_assert(kDrawCandidates == 2 * kThreads);
  const int t = static_cast<int>(threadIdx.x), lane = t & 31, j = 2 * t;
  const unsigned long long a = j < n ? fixed_weight(key_weight(keys[j])) : 0ull;
  const unsigned long long b = j + 1 < n ? fixed_weight(key_weight(keys[j + 1])) : 0ull;
  unsigned long long through = a + b;  // the warp's lanes up to this one
  for (int off = 1; off < 32; off <<= 1) {
    const unsigned long long y = __shfl_up_sync(0xFFFFFFFFu, through, off);
    if (lane >= off) through += y;
  }
  if (lane == 31) s.u[t / 32] = through;
  __syncthreads();
  unsigned long long before = through - a - b;
  for (int w = 0; w < t / 32; ++w) before += s.u[w];
  if (j < n) prefix[j] = before + a;
  if (j + 1 < n) prefix[j + 1] = before + a + b;
  __syncthreads();
}

// The first j in [0, n) with pred(j) (n if none), for pred false then true along j. Called by
// every thread of the block.
template <typename Pred>
__device__ int first_index(int n, CandidateShared& c, Pred&& pred) {
  if (threadIdx.x == 0) c.index = n;
  __syncthreads();
  for (int j = static_cast<int>(threadIdx.x); j < n; j += kThreads)
    if (pred(j) && (j == 0 || !pred(j - 1))) c.index = j;
  __syncthreads();
  const int index = c.index;
  __syncthreads();  // read before the next call resets it
  return index;
}

// Rank 0's block: top-p, min-p and the draw over its n gathered candidates (every token a
// selection can end at; kept: the row's weight sum). -1 when nothing has weight.
__device__ inline int draw_among_candidates(int n, unsigned long long kept,
                                            const SamplingRowParams& p, CandidateShared& c,
                                            ReduceShared& reduce) {
  sort_descending(c.keys, n);
  prefix_weights(c.keys, c.prefix, n, reduce);
  int end = n;  // the allowed tokens: c.keys[0, end)
  if (p.top_p < 1.0) {
    const unsigned long long need = need_for(p.top_p * static_cast<double>(kept), true, kept);
    end = first_index(n, c, [&](int j) { return c.prefix[j] >= need; }) + 1;
    if (end > n) return -1;  // the plan put the crossing among the candidates
    kept = c.prefix[end - 1];
  }
  if (p.min_p > 0.0) {
    end = first_index(end, c,
                      [&](int j) { return static_cast<double>(key_weight(c.keys[j])) < p.min_p; });
    kept = end > 0 ? c.prefix[end - 1] : 0ull;
  }
  if (kept == 0) return -1;
  const unsigned long long need = need_for(p.uniform * static_cast<double>(kept), false, kept);
  const int drawn = first_index(end, c, [&](int j) { return c.prefix[j] >= need; });
  return drawn < end ? id_of_key(c.keys[drawn]) : -1;
}

// Top-p, min-p and the draw by radix selects over the weights (kept: their sum; select.total
// holds their top digits' counts).
__device__ inline int draw_by_selects(const float* row, Slice slice, const SamplingRowParams& p,
                                      unsigned long long kept, DrawShared s) {
  bool top_digit_counted = true;  // select.total counts the next selection's candidates
  unsigned long long nucleus_min_key = 0;
  if (p.top_p < 1.0) {
    const unsigned long long need = need_for(p.top_p * static_cast<double>(kept), true, kept);
    const SelectResult nucleus =
        radix_select(row, slice, WeightItem{0ull, 0.0}, need, s.select, top_digit_counted);
    if (!nucleus.found) return -1;
    nucleus_min_key = nucleus.key;
    kept = nucleus.through;
    top_digit_counted = false;
  }
  const WeightItem allowed{nucleus_min_key, p.min_p};
  if (p.min_p > 0.0) {
    unsigned long long sum = 0;
    sweep(row, slice, [&](int i, float v, bool valid) {
      if (valid) sum += allowed(i, v).weight;
    });
    kept = row_sum(sum, s.reduce);
    top_digit_counted = false;
  }
  if (kept == 0) return -1;
  const unsigned long long need = need_for(p.uniform * static_cast<double>(kept), false, kept);
  const SelectResult drawn = radix_select(row, slice, allowed, need, s.select, top_digit_counted);
  return drawn.found ? id_of_key(drawn.key) : -1;
}

// The rank key of src's k-th token in rank order (its last when fewer take part), 0 when none
// does: for k <= kRowWarps from the threshold of sampling_top.cuh (rank 0 ranks the few keys at
// or above it into its candidate buffer), else or when those overflow by a radix select.
// thread_max: this thread's largest alternative_key in a sweep of src's slice.
__device__ inline unsigned long long kth_key(const float* src, Slice slice, int k,
                                             unsigned long long thread_max, DrawShared s) {
  if (k <= kRowWarps && !top_keys_by_threshold(src, slice, k, thread_max, s.threshold,
                                               s.candidates.keys, &s.tally.top_count)) {
    const auto ranked = static_cast<int>(cluster::load_u32(cluster::map(&s.tally.top_count, 0)));
    return ranked == 0 ? 0ull : cluster::load_u64(cluster::map(&s.candidates.keys[ranked - 1], 0));
  }
  const SelectResult kth =
      radix_select(src, slice, LogitRankItem{}, static_cast<unsigned long long>(k), s.select);
  return kth.found ? kth.key : 0ull;
}

// The drawn token of the processed row src of n tokens (max: its largest value; thread_max: this
// thread's largest alternative_key of src's slice when top-k applies); row receives the weights
// (row may be src). Called by every thread of the cluster; every thread gets it.
__device__ inline int draw_token(const float* src, float* row, int n, Slice slice,
                                 const SamplingRowParams& p, float max,
                                 unsigned long long thread_max, DrawShared s) {
  unsigned long long topk_min_key = 0;  // 0: every token is in the top-k set
  if (p.top_k > 0 && p.top_k < n) {
    topk_min_key = kth_key(src, slice, static_cast<int>(p.top_k), thread_max, s);
    if (topk_min_key == 0) return -1;
  }
  to_weights(src, row, slice, topk_min_key, max, p.inv_temperature, s.select.local[0]);
  sum_histograms(s.select.local[0], s.select.total);
  if (threadIdx.x < 32) plan_draw(s.select.total, p, s.tally);
  __syncthreads();
  const unsigned long long kept = s.tally.kept;
  const int digit = s.tally.digit;
  if (digit < 0) return draw_by_selects(row, slice, p, kept, s);
  gather_candidates(row, slice, digit, s.candidates, s.tally.count);
  cluster::sync();  // every candidate is in rank 0's buffer
  if (cluster::rank() == 0) {
    const int token =
        draw_among_candidates(static_cast<int>(s.tally.count), kept, p, s.candidates, s.reduce);
    if (threadIdx.x == 0) s.tally.token = token;
  }
  cluster::sync();
  const int token = static_cast<int>(cluster::load_u32(cluster::map(&s.tally.token, 0)));
  cluster::sync();  // rank 0 keeps its shared memory until every block has read the token
  return token;
}

}  // namespace beam::cuda::sampling_detail
