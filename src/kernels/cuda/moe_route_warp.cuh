// One warp routes one token (BEAM.md §3.10 grouped sigmoid "noaux_tc") with kernels/cpu/
// moe_route.cpp's fp32 operations: lane l holds experts [l P, (l + 1) P) in registers (P divides
// the group size, so a group is L = group_size / P whole lanes), group scores come from a
// segmented top-2 merge, kept groups from each group's rank, and the top_k experts from rounds of
// (warp max, lowest lane) over each lane's best remaining candidate. Order everywhere: higher
// value first, equal values by lower index, so ids are identical to the CPU's and weights
// bit-identical (sigmoid through torch_exp.cuh's SLEEF-exact exp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/torch_exp.cuh"

namespace beam::cuda::route {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kMaxPerLane = 8;  // experts a lane holds (E <= 256)
constexpr int kMaxGroups = 32;  // a group's rank is computed by lane g
constexpr int kMaxTopK = 32;    // lane k holds the k-th choice

struct RouteArgs {
  const float* logits;  // [num_partials, T, E]: the logits are the partials' sum in index order
  int num_partials;
  const float* bias;  // [E]
  int32_t* ids;       // [T, top_k]
  float* weights;     // [T, top_k]
  int64_t num_tokens;
  int num_experts, group_size, num_groups, topk_groups, top_k;
  int per_lane;  // P: divides group_size, 32 P >= num_experts, P <= kMaxPerLane
  bool norm_topk_prob;
  float routed_scaling_factor;
};

// A key whose unsigned order is the float order (no NaN reaches it): -0 and +0 get the same key,
// and 0 is below every float's key (it marks "no candidate").
__device__ __forceinline__ uint32_t order_key(float v) {
  const uint32_t u = __float_as_uint(v == 0.0f ? 0.0f : v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Token t's scores and choices of this lane's experts lane P + j (j >= P or past E: score 0,
// choice -inf). The logits are summed over the partials in index order (loads batched so a
// token's partials arrive in one round trip), read through L2 (other blocks may have written them).
__device__ __forceinline__ void lane_choices(const RouteArgs& a, int64_t t, int lane,
                                             float (&score)[kMaxPerLane],
                                             float (&choice)[kMaxPerLane]) {
  constexpr int kBatch = 8;  // further partials loaded at once
  const int P = a.per_lane, e0 = lane * P;
  const bool active = e0 < a.num_experts;
  const float* src = a.logits + t * a.num_experts + e0;
  const int64_t stride = a.num_tokens * a.num_experts;
  float logit[kMaxPerLane];
#pragma unroll
  for (int j = 0; j < kMaxPerLane; ++j) logit[j] = active && j < P ? __ldcg(src + j) : 0.0f;
  for (int s0 = 1; s0 < a.num_partials; s0 += kBatch) {
    float part[kBatch][kMaxPerLane];
#pragma unroll
    for (int i = 0; i < kBatch; ++i)
#pragma unroll
      for (int j = 0; j < kMaxPerLane; ++j)
        part[i][j] = active && j < P && s0 + i < a.num_partials
                         ? __ldcg(src + (s0 + i) * stride + j)
                         : 0.0f;
#pragma unroll
    for (int i = 0; i < kBatch; ++i)
#pragma unroll
      for (int j = 0; j < kMaxPerLane; ++j)
        if (s0 + i < a.num_partials) logit[j] = __fadd_rn(logit[j], part[i][j]);
  }
#pragma unroll
  for (int j = 0; j < kMaxPerLane; ++j) {
    score[j] = 0.0f;
    choice[j] = -INFINITY;
    if (active && j < P) {
      score[j] = torch_exp::sigmoidf(logit[j]);
      const float c = __fadd_rn(score[j], __ldg(a.bias + e0 + j));
      choice[j] = c != c ? -INFINITY : c;  // NaN (the CPU aborts): last in the order, not chaos
    }
  }
}

// Bit g set: group g is among the topk_groups best (group score = sum of its two largest choices,
// the only one for groups of one; same set as the CPU's partial_sort).
__device__ __forceinline__ uint32_t kept_groups(const RouteArgs& a,
                                                const float (&choice)[kMaxPerLane], int lane) {
  float first = -INFINITY, second = -INFINITY;  // this lane's two largest, as the CPU's loop
#pragma unroll
  for (int j = 0; j < kMaxPerLane; ++j) {
    if (j >= a.per_lane) break;
    if (choice[j] > first) {
      second = first;
      first = choice[j];
    } else if (choice[j] > second) {
      second = choice[j];
    }
  }
  // Segmented tree over the group's L lanes: lane i ends with the top two of lanes [i, i + 2 off)
  // of its group, so the group's first lane holds the group's (multiset) top two.
  const int L = a.group_size / a.per_lane, pos = lane % L;
  for (int off = 1; off < L; off <<= 1) {
    const float f = __shfl_down_sync(kFullMask, first, off);
    const float s = __shfl_down_sync(kFullMask, second, off);
    if (pos + off < L) {
      second = fmaxf(fminf(first, f), fmaxf(second, s));
      first = fmaxf(first, f);
    }
  }
  const uint32_t score_key = order_key(a.group_size >= 2 ? __fadd_rn(first, second) : first);
  const int G = a.num_groups;
  const uint32_t key = __shfl_sync(kFullMask, score_key, lane < G ? lane * L : 0);  // group `lane`
  int rank = 0;  // groups ahead of group `lane`
  for (int g = 0; g < G; ++g) {
    const uint32_t other = __shfl_sync(kFullMask, key, g);
    rank += other > key || (other == key && g < lane);
  }
  return __ballot_sync(kFullMask, lane < G && rank < a.topk_groups);
}

// This lane's best remaining candidate: the largest key whose bit in `taken` is clear (equal keys:
// the lower j); key 0 when none.
struct LaneBest {
  uint32_t key;
  int j;
  float score;
};
__device__ __forceinline__ LaneBest lane_best(const uint32_t (&key)[kMaxPerLane],
                                              const float (&score)[kMaxPerLane], uint32_t taken) {
  LaneBest b{0u, 0, 0.0f};
#pragma unroll
  for (int j = 0; j < kMaxPerLane; ++j)
    if (!((taken >> j) & 1u) && key[j] > b.key) b = {key[j], j, score[j]};
  return b;
}

// The whole warp routes token t: ids[t, k] and weights[t, k] for k < top_k.
__device__ __forceinline__ void route_token(const RouteArgs& a, int64_t t, int lane) {
  float score[kMaxPerLane], choice[kMaxPerLane];
  lane_choices(a, t, lane, score, choice);
  const uint32_t kept = kept_groups(a, choice, lane);
  const int P = a.per_lane, L = a.group_size / P;
  const bool candidate = lane * P < a.num_experts && ((kept >> (lane / L)) & 1u);
  uint32_t key[kMaxPerLane];
#pragma unroll
  for (int j = 0; j < kMaxPerLane; ++j) key[j] = candidate && j < P ? order_key(choice[j]) : 0u;
  // Round k: the warp's first candidate in the CPU's order is the largest lane head, equal heads
  // by the lowest lane (lanes hold ascending expert ranges); lane k keeps it, its lane advances.
  uint32_t taken = 0;
  LaneBest head = lane_best(key, score, taken);
  int my_id = -1;
  float my_score = 0.0f;
#pragma unroll 1
  for (int k = 0; k < a.top_k; ++k) {
    const uint32_t best = __reduce_max_sync(kFullMask, head.key);
    if (best == 0u) break;  // fewer candidates than top_k (the api forbids it): ids -1
    const int winner = __ffs(__ballot_sync(kFullMask, head.key == best)) - 1;
    const int j = __shfl_sync(kFullMask, head.j, winner);
    const float s = __shfl_sync(kFullMask, head.score, winner);
    if (lane == k) {
      my_id = winner * P + j;
      my_score = s;
    }
    if (lane == winner) {
      taken |= 1u << head.j;
      head = lane_best(key, score, taken);
    }
  }
  // total = Σ_k score[id_k] in k order, then w = score / (total + 1e-20) * scale, as the CPU.
  float total = 0.0f;
  for (int k = 0; k < a.top_k; ++k) total = __fadd_rn(total, __shfl_sync(kFullMask, my_score, k));
  if (lane < a.top_k) {
    float w = my_score;
    if (a.norm_topk_prob) w = __fdiv_rn(w, __fadd_rn(total, 1e-20f));
    w = __fmul_rn(w, a.routed_scaling_factor);
    a.ids[t * a.top_k + lane] = my_id;
    a.weights[t * a.top_k + lane] = w;
  }
}

}  // namespace beam::cuda::route
