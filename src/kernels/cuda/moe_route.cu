// CUDA grouped sigmoid "noaux_tc" routing (BEAM.md §3.10) with kernels/cpu/moe_route.cpp's fp32
// operations in the same order: one warp per token; groups and experts are picked by rounds of
// warp-wide argmax under the CPU's order (higher value first, equal values by lower index), so
// ids are identical and weights bit-identical (sigmoid through torch_exp.cuh's SLEEF-exact exp).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/check.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/moe.h"
#include "kernels/cuda/torch_exp.cuh"

namespace beam::cuda {
namespace {

constexpr int kMaxWarpsPerBlock = 4;
constexpr int64_t kMaxExperts = 32 * 64;  // each lane's exclusion bits fit one uint64_t
constexpr int64_t kMaxGroups = 32;        // one group per lane
constexpr int64_t kMaxTopK = 32;          // lane k holds the k-th choice
constexpr size_t kSmemBudget = 48 * 1024;

struct RouteArgs {
  const float* logits;  // [T, E]
  const float* bias;    // [E]
  int32_t* ids;         // [T, top_k]
  float* weights;       // [T, top_k]
  int64_t num_tokens;
  int num_experts, group_size, num_groups, topk_groups, top_k;
  bool norm_topk_prob;
  float routed_scaling_factor;
};

// A candidate group or expert; index < 0 means none.
struct Candidate {
  float value;
  int index;
};

// The CPU's ByValueThenIndex: higher value first, equal values by lower index; any real
// candidate precedes none.
__device__ __forceinline__ bool precedes(Candidate a, Candidate b) {
  if (a.index < 0) return false;
  if (b.index < 0) return true;
  return a.value > b.value || (a.value == b.value && a.index < b.index);
}

// The first candidate of the warp in that order; every lane gets it.
__device__ __forceinline__ Candidate warp_first(Candidate c) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const Candidate o{__shfl_xor_sync(0xffffffffu, c.value, offset),
                      __shfl_xor_sync(0xffffffffu, c.index, offset)};
    if (precedes(o, c)) c = o;
  }
  return c;
}

// Sum of the two largest choices of a group (the only one if the group has one), as the CPU.
__device__ float group_score(const float* choice, int size) {
  float first = -INFINITY, second = -INFINITY;
  for (int i = 0; i < size; ++i) {
    if (choice[i] > first) {
      second = first;
      first = choice[i];
    } else if (choice[i] > second) {
      second = choice[i];
    }
  }
  return size >= 2 ? __fadd_rn(first, second) : first;
}

// Bit g set: group g is among the topk_groups best (same set as the CPU's partial_sort).
__device__ uint32_t kept_groups(const RouteArgs& a, const float* choice, int lane) {
  Candidate mine{0.0f, -1};
  if (lane < a.num_groups) mine = {group_score(choice + lane * a.group_size, a.group_size), lane};
  uint32_t kept = 0;
  for (int r = 0; r < a.topk_groups; ++r) {
    const Candidate best = warp_first(mine);
    kept |= 1u << best.index;
    if (lane == best.index) mine.index = -1;
  }
  return kept;
}

// Lane k (< top_k) returns the k-th expert by descending choice among the kept groups.
__device__ int choose_experts(const RouteArgs& a, const float* choice, uint32_t kept, int lane) {
  uint64_t excluded = 0;  // bit j: expert lane + 32 j is not (or no longer) a candidate
  for (int j = 0, e = lane; e < a.num_experts; ++j, e += 32)
    if (!((kept >> (e / a.group_size)) & 1u)) excluded |= uint64_t{1} << j;
  int mine = -1;
  for (int k = 0; k < a.top_k; ++k) {
    Candidate c{0.0f, -1};
    for (int j = 0, e = lane; e < a.num_experts; ++j, e += 32)
      if (!((excluded >> j) & 1u) && precedes(Candidate{choice[e], e}, c)) c = {choice[e], e};
    const Candidate best = warp_first(c);
    if (best.index % 32 == lane) excluded |= uint64_t{1} << (best.index / 32);
    if (lane == k) mine = best.index;
  }
  return mine;
}

// One warp per token; dynamic shared memory holds each warp's score[E] and choice[E].
__global__ void route_kernel(RouteArgs a) {
  extern __shared__ float smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + warp;
  if (t >= a.num_tokens) return;  // the whole warp leaves; only warp-level syncs below
  const int E = a.num_experts;
  float* score = smem + static_cast<int64_t>(warp) * 2 * E;
  float* choice = score + E;
  const float* logits = a.logits + t * E;
  for (int e = lane; e < E; e += 32) {
    score[e] = torch_exp::sigmoidf(logits[e]);
    const float c = __fadd_rn(score[e], a.bias[e]);
    choice[e] = c != c ? -INFINITY : c;  // NaN (the CPU aborts): last in the order, not chaos
  }
  __syncwarp();

  const uint32_t kept = kept_groups(a, choice, lane);
  const int id = choose_experts(a, choice, kept, lane);

  // total = Σ_k score[id_k] in k order, then w = score / (total + 1e-20) * scale, as the CPU.
  float total = 0.0f;
  for (int k = 0; k < a.top_k; ++k)
    total = __fadd_rn(total, score[__shfl_sync(0xffffffffu, id, k)]);
  if (lane < a.top_k) {
    float w = score[id];
    if (a.norm_topk_prob) w = __fdiv_rn(w, __fadd_rn(total, 1e-20f));
    w = __fmul_rn(w, a.routed_scaling_factor);
    a.ids[t * a.top_k + lane] = id;
    a.weights[t * a.top_k + lane] = w;
  }
}

}  // namespace

void moe_route(CudaContext& ctx, const TensorView& router_logits, const TensorView& bias,
               const RouterParams& params, const TensorView& ids, const TensorView& weights) {
  const int64_t T = router_logits.dim(0), E = router_logits.dim(1);
  BEAM_CHECK(E <= kMaxExperts && params.num_groups <= kMaxGroups && params.top_k <= kMaxTopK)
      << "moe_route (CUDA): " << E << " experts, " << params.num_groups << " groups, top_k "
      << params.top_k << " exceed this kernel's limits (" << kMaxExperts << ", " << kMaxGroups
      << ", " << kMaxTopK << ")";
  if (T == 0) return;
  const size_t warp_smem = static_cast<size_t>(2 * E) * sizeof(float);
  const int warps =
      static_cast<int>(std::clamp<size_t>(kSmemBudget / warp_smem, 1, size_t{kMaxWarpsPerBlock}));
  RouteArgs a{router_logits.as<float>(),
              bias.as<float>(),
              ids.as<int32_t>(),
              weights.as<float>(),
              T,
              static_cast<int>(E),
              static_cast<int>(E / params.num_groups),
              static_cast<int>(params.num_groups),
              static_cast<int>(params.topk_groups),
              static_cast<int>(params.top_k),
              params.norm_topk_prob,
              params.routed_scaling_factor};
  const int64_t blocks = (T + warps - 1) / warps;
  BEAM_CHECK(blocks <= INT32_MAX) << "moe_route (CUDA): " << T << " tokens";
  route_kernel<<<static_cast<unsigned>(blocks), warps * 32, warps * warp_smem, ctx.stream>>>(a);
  CUDA_LAUNCH_OK();
}

}  // namespace beam::cuda
