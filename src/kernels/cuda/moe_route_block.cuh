// One block of kThreads threads routes one token (BEAM.md §3.10 grouped sigmoid "noaux_tc") with
// kernels/cpu/moe_route.cpp's fp32 operations: thread e computes expert e's score and choice,
// warps compute the group scores (top two by butterfly merges), every thread its group's rank,
// each warp ranks its 32 experts, and a warp's leading top_k get their block-wide rank from the
// other warps' leading top_k. Order everywhere: higher value first, equal values by lower index,
// so ids are identical to the CPU's and weights bit-identical (sigmoid through torch_exp.cuh's
// SLEEF-exact exp). Critical path: one round trip for the logits (the caller loads the bias
// beforehand), one sigmoid, ~100 shared-memory / shuffle steps: ~3.7 us of the batch-1 MoE layer
// (H200 run 150's timeline).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/api/moe.h"
#include "kernels/cuda/torch_exp.cuh"

namespace beam::cuda::route {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kThreads = 256;  // a routing block: thread e holds expert e
constexpr int kWarps = kThreads / 32;
constexpr int kMaxExperts = kThreads;
constexpr int kMaxGroups = 32;  // group scores in shared memory
constexpr int kMaxTopK = 32;    // a warp's 32 ranked experts cover its share of the top_k

struct RouteArgs {
  const float* logits;  // [num_partials, T, E]: the logits are the partials' sum in index order
  int num_partials;
  const float* bias;  // [E]
  int32_t* ids;       // [T, top_k]
  float* weights;     // [T, top_k]
  int64_t num_tokens;
  const int32_t* active;  // [1]: tokens from active[0] on are padding (nullptr: none)
  int64_t first_token;    // token 0's index in the call active counts (a slice's offset)
  int num_experts, group_size, num_groups, topk_groups, top_k;
  bool norm_topk_prob;
  float routed_scaling_factor;
};

// A routing block's shared memory (6.4 KB).
struct RouteSmem {
  float score[kMaxExperts];
  float choice[kMaxExperts];
  uint32_t group_key[kMaxGroups];
  uint64_t order[kMaxExperts];   // expert_order of thread e
  uint64_t ranked[kMaxExperts];  // warp w's 32 expert_orders, largest first, at [32 w, 32 w + 32)
  int32_t id[kMaxTopK];          // the k-th choice (-1: none)
  float chosen[kMaxTopK];        // its score (0: none)
};

// A key whose unsigned order is the float order (no NaN reaches it): -0 and +0 get the same key,
// and 0 is below every float's key (it marks "no candidate").
__device__ __forceinline__ uint32_t order_key(float v) {
  const uint32_t u = __float_as_uint(v == 0.0f ? 0.0f : v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Expert e in the routing order, unique per e: choice key first, then the lower index.
// Non-candidates (choice key 0) rank below every candidate.
__device__ __forceinline__ uint64_t expert_order(uint32_t choice_key, int e) {
  return (static_cast<uint64_t>(choice_key) << 32) | (0xffffffffu - static_cast<uint32_t>(e));
}

// This thread's expert bias (thread e: bias[e]; 0 past E): loaded once per block, before it may
// have to wait for the logits.
__device__ __forceinline__ float expert_bias(const RouteArgs& a) {
  const int e = static_cast<int>(threadIdx.x);
  return e < a.num_experts ? __ldg(a.bias + e) : 0.0f;
}

// Thread e < E: token t's score and choice of expert e (bias: expert_bias) into s. The logit is
// the partials' sum in index order (loads batched so they arrive in one round trip), read through
// L2 (other blocks may have written them).
__device__ __forceinline__ void expert_choice(const RouteArgs& a, int64_t t, int e, float bias,
                                              RouteSmem& s) {
  constexpr int kBatch = 8;  // further partials loaded at once
  const float* src = a.logits + t * a.num_experts + e;
  const int64_t stride = a.num_tokens * a.num_experts;
  float logit = __ldcg(src);
  for (int s0 = 1; s0 < a.num_partials; s0 += kBatch) {
    float part[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i)
      part[i] = s0 + i < a.num_partials ? __ldcg(src + (s0 + i) * stride) : 0.0f;
#pragma unroll
    for (int i = 0; i < kBatch; ++i)
      if (s0 + i < a.num_partials) logit = __fadd_rn(logit, part[i]);
  }
  const float score = torch_exp::sigmoidf(logit);
  const float c = __fadd_rn(score, bias);
  s.score[e] = score;
  s.choice[e] = c != c ? -INFINITY : c;  // NaN (the CPU aborts): last in the order, not chaos
}

// Warp `warp` stores the keys of groups warp, warp + kWarps, ... < num_groups: group score = sum
// of its two largest choices (the only one for groups of one), as the CPU's loop (the multiset
// top two do not depend on the merge order).
__device__ __forceinline__ void group_keys(const RouteArgs& a, int warp, int lane, RouteSmem& s) {
  for (int g = warp; g < a.num_groups; g += kWarps) {
    float first = -INFINITY, second = -INFINITY;  // this lane's share: i = lane + 32 j
    for (int i = lane; i < a.group_size; i += 32) {
      const float c = s.choice[g * a.group_size + i];
      if (c > first) {
        second = first;
        first = c;
      } else if (c > second) {
        second = c;
      }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {  // every lane ends with the warp's top two
      const float f = __shfl_xor_sync(kFullMask, first, off);
      const float sec = __shfl_xor_sync(kFullMask, second, off);
      second = fmaxf(fminf(first, f), fmaxf(second, sec));
      first = fmaxf(first, f);
    }
    if (lane == 0)
      s.group_key[g] = order_key(a.group_size >= 2 ? __fadd_rn(first, second) : first);
  }
}

// Whether group g is among the topk_groups best (the set of the CPU's partial_sort).
__device__ __forceinline__ bool group_kept(const RouteArgs& a, const RouteSmem& s, int g) {
  const uint32_t key = s.group_key[g];
  int ahead = 0;
#pragma unroll 8
  for (int h = 0; h < a.num_groups; ++h) {
    const uint32_t other = s.group_key[h];
    ahead += other > key || (other == key && h < g);
  }
  return ahead < a.topk_groups;
}

// Warp 0: ids[t, k] and weights[t, k] for k < top_k from s.id / s.chosen. total = Σ_k chosen[k]
// in k order, then w = score / (total + 1e-20) * scale, as the CPU.
__device__ __forceinline__ void write_token(const RouteArgs& a, int64_t t, int lane,
                                            const RouteSmem& s) {
  float total = 0.0f;
  for (int k = 0; k < a.top_k; ++k) total = __fadd_rn(total, s.chosen[k]);
  if (lane < a.top_k) {
    float w = s.chosen[lane];
    if (a.norm_topk_prob) w = __fdiv_rn(w, __fadd_rn(total, 1e-20f));
    w = __fmul_rn(w, a.routed_scaling_factor);
    a.ids[t * a.top_k + lane] = s.id[lane];
    a.weights[t * a.top_k + lane] = w;
  }
}

// The block (kThreads threads, every one calling with the same t and its expert_bias) routes
// token t, or marks it padding (ids kNoExpert, weights 0); s is free again on return.
__device__ __forceinline__ void route_token(const RouteArgs& a, int64_t t, float bias,
                                            RouteSmem& s) {
  const int e = static_cast<int>(threadIdx.x), warp = e / 32, lane = e % 32;
  if (a.active != nullptr && a.first_token + t >= *a.active) {  // uniform over the block
    if (e < a.top_k) {
      a.ids[t * a.top_k + e] = kNoExpert;
      a.weights[t * a.top_k + e] = 0.0f;
    }
    return;
  }
  if (e < a.num_experts) expert_choice(a, t, e, bias, s);
  if (e < a.top_k) {  // fewer candidates than top_k (the api forbids it): ids -1, weights 0
    s.id[e] = -1;
    s.chosen[e] = 0.0f;
  }
  __syncthreads();
  group_keys(a, warp, lane, s);
  __syncthreads();
  const bool candidate = e < a.num_experts && group_kept(a, s, e / a.group_size);
  const uint64_t mine = expert_order(candidate ? order_key(s.choice[e]) : 0u, e);
  s.order[e] = mine;
  __syncwarp();
  int ahead = 0;  // experts of this warp before e (orders are unique: a permutation of 0..31)
#pragma unroll
  for (int j = 0; j < 32; ++j) ahead += s.order[warp * 32 + j] > mine;
  s.ranked[warp * 32 + ahead] = mine;
  __syncthreads();
  // Only a warp's leading top_k can make the block's (the loops unrolled: independent loads).
  if (candidate && ahead < a.top_k) {
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      if (w == warp) continue;
#pragma unroll 8
      for (int j = 0; j < a.top_k; ++j) ahead += s.ranked[w * 32 + j] > mine;
    }
    if (ahead < a.top_k) {
      s.id[ahead] = e;
      s.chosen[ahead] = s.score[e];
    }
  }
  __syncthreads();
  if (warp == 0) write_token(a, t, lane, s);
  __syncthreads();
}

}  // namespace beam::cuda::route
