// CUDA grouped sigmoid "noaux_tc" routing (BEAM.md §3.10) with kernels/cpu/moe_route.cpp's fp32
// operations in the same order: the threads of a block turn each token's logits into scores and
// choices in shared memory, then one warp per token picks groups and experts by rounds of
// warp-wide (key, index) maxima under the CPU's order (higher value first, equal values by lower
// index), so ids are identical and weights bit-identical (sigmoid through torch_exp.cuh's
// SLEEF-exact exp).
// Also moe_router_route: for small T one fused kernel computes the fp32 router GEMM as split-K
// partial sums over all SMs and the last block to finish a tile of tokens (a ticket counter that
// it resets, so graph replays work) adds the partials in split order (no float atomics) and
// routes those tokens; for large T linear() + moe_route.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/check.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/moe.h"
#include "kernels/cuda/torch_exp.cuh"

namespace beam::cuda {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kMaxWarpsPerBlock = 4;      // warps (tokens) of a moe_route block
constexpr int64_t kMaxExperts = 32 * 64;  // each lane's exclusion bits fit one uint64_t
constexpr int64_t kMaxGroups = 32;        // one group per lane
constexpr int64_t kMaxTopK = 32;          // lane k holds the k-th choice
constexpr size_t kSmemBudget = 48 * 1024;

struct RouteArgs {
  const float* logits;  // [num_partials, T, E]: the logits are the partials' sum in index order
  int num_partials;
  const float* bias;  // [E]
  int32_t* ids;       // [T, top_k]
  float* weights;     // [T, top_k]
  int64_t num_tokens;
  int num_experts, group_size, num_groups, topk_groups, top_k;
  bool norm_topk_prob;
  float routed_scaling_factor;
};

// A key whose unsigned order is the float order (no NaN reaches it): -0 and +0 get the same key,
// and 0 is below every float's key (it marks "no candidate").
__device__ __forceinline__ uint32_t order_key(float v) {
  const uint32_t u = __float_as_uint(v == 0.0f ? 0.0f : v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The first candidate of the warp in the CPU's order (largest key, equal keys by lower index);
// index < 0 means the lane has none. Every lane gets the winner's index (-1 when no lane had one).
__device__ __forceinline__ int warp_pick(uint32_t key, int index) {
  const uint32_t best = __reduce_max_sync(kFullMask, index >= 0 ? key : 0u);
  const uint32_t who = __reduce_min_sync(
      kFullMask, index >= 0 && key == best ? static_cast<uint32_t>(index) : 0xffffffffu);
  return who == 0xffffffffu ? -1 : static_cast<int>(who);
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
  int mine = -1;
  uint32_t key = 0;
  if (lane < a.num_groups) {
    mine = lane;
    key = order_key(group_score(choice + lane * a.group_size, a.group_size));
  }
  uint32_t kept = 0;
  for (int r = 0; r < a.topk_groups; ++r) {
    const int best = warp_pick(key, mine);
    if (best < 0) break;
    kept |= 1u << best;
    if (lane == best) mine = -1;
  }
  return kept;
}

// This lane's best remaining candidate (experts lane + 32 j whose bit j is clear).
struct LaneBest {
  uint32_t key;
  int index;
};
__device__ __forceinline__ LaneBest lane_best(const float* choice, int num_experts,
                                              uint64_t excluded, int lane) {
  LaneBest b{0u, -1};
  for (int j = 0, e = lane; e < num_experts; ++j, e += 32) {
    if ((excluded >> j) & 1u) continue;
    const uint32_t k = order_key(choice[e]);
    if (b.index < 0 || k > b.key) b = {k, e};  // ascending e: equal keys keep the lower index
  }
  return b;
}

// Lane k (< top_k) returns the k-th expert by descending choice among the kept groups.
__device__ int choose_experts(const RouteArgs& a, const float* choice, uint32_t kept, int lane) {
  uint64_t excluded = 0;  // bit j: expert lane + 32 j is not (or no longer) a candidate
  for (int j = 0, e = lane; e < a.num_experts; ++j, e += 32)
    if (!((kept >> (e / a.group_size)) & 1u)) excluded |= uint64_t{1} << j;
  LaneBest b = lane_best(choice, a.num_experts, excluded, lane);
  int mine = -1;
  for (int k = 0; k < a.top_k; ++k) {
    const int best = warp_pick(b.key, b.index);
    if (lane == k) mine = best;
    if (best >= 0 && best % 32 == lane) {  // the winner's lane moves to its next candidate
      excluded |= uint64_t{1} << (best / 32);
      b = lane_best(choice, a.num_experts, excluded, lane);
    }
  }
  return mine;
}

// One warp routes token t from its scores and choices (shared memory).
__device__ void route_warp(const RouteArgs& a, int64_t t, const float* score, const float* choice,
                           int lane) {
  const uint32_t kept = kept_groups(a, choice, lane);
  const int id = choose_experts(a, choice, kept, lane);
  // total = Σ_k score[id_k] in k order, then w = score / (total + 1e-20) * scale, as the CPU.
  const float mine = lane < a.top_k && id >= 0 ? score[id] : 0.0f;
  float total = 0.0f;
#pragma unroll 8
  for (int k = 0; k < a.top_k; ++k) total = __fadd_rn(total, __shfl_sync(kFullMask, mine, k));
  if (lane < a.top_k) {
    float w = mine;
    if (a.norm_topk_prob) w = __fdiv_rn(w, __fadd_rn(total, 1e-20f));
    w = __fmul_rn(w, a.routed_scaling_factor);
    a.ids[t * a.top_k + lane] = id;
    a.weights[t * a.top_k + lane] = w;
  }
}

// Routes tokens [t0, t1) with the whole block: smem holds (t1 - t0) x E scores then as many
// choices. The logits may have been written by other blocks of this kernel (read through L2).
__device__ void route_tokens(const RouteArgs& a, int64_t t0, int64_t t1, float* smem) {
  constexpr int kBatch = 8;  // partial sums loaded at once
  const int E = a.num_experts;
  const int n = static_cast<int>(t1 - t0);
  float* score = smem;
  float* choice = smem + static_cast<int64_t>(n) * E;
  const int64_t partial_stride = a.num_tokens * E;
  for (int idx = static_cast<int>(threadIdx.x); idx < n * E; idx += static_cast<int>(blockDim.x)) {
    const int e = idx % E;
    const float* src = a.logits + (t0 + idx / E) * E + e;
    float logit = __ldcg(src);
    for (int s0 = 1; s0 < a.num_partials; s0 += kBatch) {
      float part[kBatch];
#pragma unroll
      for (int i = 0; i < kBatch; ++i)
        part[i] = s0 + i < a.num_partials ? __ldcg(src + (s0 + i) * partial_stride) : 0.0f;
#pragma unroll
      for (int i = 0; i < kBatch; ++i)
        if (s0 + i < a.num_partials) logit = __fadd_rn(logit, part[i]);
    }
    const float s = torch_exp::sigmoidf(logit);
    const float c = __fadd_rn(s, __ldg(a.bias + e));
    score[idx] = s;
    choice[idx] = c != c ? -INFINITY : c;  // NaN (the CPU aborts): last in the order, not chaos
  }
  __syncthreads();
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  for (int u = warp; u < n; u += warps)
    route_warp(a, t0 + u, score + static_cast<int64_t>(u) * E, choice + static_cast<int64_t>(u) * E,
               lane);
}

// Block b routes tokens [b W, (b + 1) W), W = its warps.
__global__ void route_kernel(RouteArgs a) {
  extern __shared__ float smem[];
  const int64_t per_block = blockDim.x / 32;
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * per_block;
  route_tokens(a, t0, std::min(t0 + per_block, a.num_tokens), smem);
}

void check_route_limits(int64_t E, const RouterParams& params) {
  BEAM_CHECK(E <= kMaxExperts && params.num_groups <= kMaxGroups && params.top_k <= kMaxTopK)
      << "moe_route (CUDA): " << E << " experts, " << params.num_groups << " groups, top_k "
      << params.top_k << " exceed this kernel's limits (" << kMaxExperts << ", " << kMaxGroups
      << ", " << kMaxTopK << ")";
}

RouteArgs route_args(const float* logits, int num_partials, int64_t T, int64_t E,
                     const TensorView& bias, const RouterParams& params, const TensorView& ids,
                     const TensorView& weights) {
  return RouteArgs{logits,
                   num_partials,
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
}

// Routes T tokens from `num_partials` fp32 logit arrays [num_partials, T, E] (summed in order).
void launch_route(CudaContext& ctx, const float* logits, int num_partials, int64_t T, int64_t E,
                  const TensorView& bias, const RouterParams& params, const TensorView& ids,
                  const TensorView& weights) {
  check_route_limits(E, params);
  if (T == 0) return;
  const size_t warp_smem = static_cast<size_t>(2 * E) * sizeof(float);
  const int warps =
      static_cast<int>(std::clamp<size_t>(kSmemBudget / warp_smem, 1, size_t{kMaxWarpsPerBlock}));
  const RouteArgs a = route_args(logits, num_partials, T, E, bias, params, ids, weights);
  const int64_t blocks = (T + warps - 1) / warps;
  BEAM_CHECK(blocks <= INT32_MAX) << "moe_route (CUDA): " << T << " tokens";
  route_kernel<<<static_cast<unsigned>(blocks), warps * 32, warps * warp_smem, ctx.stream>>>(a);
  CUDA_LAUNCH_OK();
}

// ---- moe_router_route for small T: split-K logits and routing in one kernel ---------------------

constexpr int kLogitWarps = 8;             // warps per block
constexpr int kLogitExpertsPerWarp = 2;    // router rows a warp holds in registers
constexpr int kLogitChunksPerLane = 5;     // kVec-wide chunks per lane and row (5120 = 8 x 640)
constexpr int kLogitTokensAtOnce = 4;      // tokens whose dot products a warp interleaves
constexpr int64_t kMaxTokensPerTile = 16;  // tokens of one block (grid.z: tiles of tokens)
constexpr size_t kRouteSmemBudget = 32 * 1024;  // the routing block's scores and choices
constexpr size_t kCounterBytes = 512;           // ticket counters ahead of the partial sums

static_assert(kMoeRouterFusedMaxTokens * sizeof(uint32_t) <= kCounterBytes,
              "one ticket counter per tile of tokens");

struct FusedArgs {
  const __nv_bfloat16* x;  // [T, H]
  const float* w;          // [E, H]
  int64_t H, tile_tokens;
  uint32_t* counters;  // [gridDim.z]: blocks of the tile done; zero between launches
  RouteArgs route;     // route.logits: partial[gridDim.y, T, E], split s sums columns
                       // [s L, (s + 1) L), L = split_len
};

template <int kVec>
constexpr int64_t split_len() {
  return int64_t{32} * kVec * kLogitChunksPerLane;
}

// Tokens in the tile of a fused launch: as many as kRouteSmemBudget holds scores and choices of.
int64_t tile_tokens(int64_t E) {
  return std::clamp<int64_t>(static_cast<int64_t>(kRouteSmemBudget / (2 * E * sizeof(float))), 1,
                             kMaxTokensPerTile);
}

// The partial sums of block (b, s, z): warp w holds router rows e0 = (b kLogitWarps + w) R and
// e0 + 1, columns [s L, (s + 1) L), in registers and for each token t of tile z writes
// partial[s, t, e] = Σ f32(x[t, c]) * w[e, c] (fp32 fma per lane in column order, then a fixed
// butterfly), kLogitTokensAtOnce tokens interleaved. Every token's sums are the same whatever T.
template <int kVec>
__device__ void router_partials(const FusedArgs& a, int64_t t0, int64_t t1) {
  constexpr int R = kLogitExpertsPerWarp, C = kLogitChunksPerLane, U = kLogitTokensAtOnce;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t E = a.route.num_experts;
  const int64_t e0 = (static_cast<int64_t>(blockIdx.x) * kLogitWarps + warp) * R;
  if (e0 >= E) return;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * split_len<kVec>();
  float wv[R][C][kVec];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float* row = a.w + (e0 + r < E ? e0 + r : e0) * a.H;  // a row past E: never stored
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int64_t k = k0 + (static_cast<int64_t>(c) * 32 + lane) * kVec;
      if constexpr (kVec == 4) {
        const float4 v = k < a.H ? __ldg(reinterpret_cast<const float4*>(row + k)) : float4{};
        wv[r][c][0] = v.x;
        wv[r][c][1] = v.y;
        wv[r][c][2] = v.z;
        wv[r][c][3] = v.w;
      } else {
        wv[r][c][0] = k < a.H ? __ldg(row + k) : 0.0f;
      }
    }
  }
  float* out = const_cast<float*>(a.route.logits) +
               static_cast<int64_t>(blockIdx.y) * a.route.num_tokens * E;
  for (int64_t t = t0; t < t1; t += U) {
    float acc[U][R] = {};
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int64_t k = k0 + (static_cast<int64_t>(c) * 32 + lane) * kVec;
      if (k >= a.H) break;
      float xv[U][kVec];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const __nv_bfloat16* xt = a.x + (t + u < t1 ? t + u : t) * a.H;  // past t1: not stored
        if constexpr (kVec == 4) {
          const uint2 raw = __ldg(reinterpret_cast<const uint2*>(xt + k));
          xv[u][0] = __uint_as_float(raw.x << 16);
          xv[u][1] = __uint_as_float(raw.x & 0xffff0000u);
          xv[u][2] = __uint_as_float(raw.y << 16);
          xv[u][3] = __uint_as_float(raw.y & 0xffff0000u);
        } else {
          xv[u][0] = __bfloat162float(xt[k]);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int i = 0; i < kVec; ++i) acc[u][r] = __fmaf_rn(xv[u][i], wv[r][c][i], acc[u][r]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1)
          acc[u][r] = __fadd_rn(acc[u][r], __shfl_xor_sync(kFullMask, acc[u][r], offset));
        if (lane == u * R + r && t + u < t1 && e0 + r < E) out[(t + u) * E + e0 + r] = acc[u][r];
      }
    }
  }
}

// grid (ceil(E / 16), splits, tiles of tile_tokens), kLogitWarps * 32 threads, dynamic smem for
// the routing of one tile. Each block writes its partial sums; the last block of a tile to finish
// (ticket counter) routes the tile's tokens and resets the counter for the next launch.
template <int kVec>
__global__ void __launch_bounds__(kLogitWarps * 32) router_route_kernel(FusedArgs a) {
  extern __shared__ float smem[];
  __shared__ bool last;
  const int64_t t0 = static_cast<int64_t>(blockIdx.z) * a.tile_tokens;
  const int64_t t1 = std::min(t0 + a.tile_tokens, a.route.num_tokens);
  router_partials<kVec>(a, t0, t1);
  __threadfence();  // this thread's partial sums are visible device-wide before the ticket
  __syncthreads();
  if (threadIdx.x == 0) {
    const uint32_t blocks = gridDim.x * gridDim.y;
    last = atomicAdd(a.counters + blockIdx.z, 1u) == blocks - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  route_tokens(a.route, t0, t1, smem);
  if (threadIdx.x == 0) a.counters[blockIdx.z] = 0;  // every block of the tile has counted
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// ctx.moe_router: ticket counters (zeroed whenever the scratch is reallocated) then at least
// `bytes` of logits or partial sums.
struct RouterScratch {
  uint32_t* counters;
  float* logits;
};
RouterScratch reserve_router_scratch(CudaContext& ctx, size_t bytes) {
  const void* before = ctx.moe_router.base;
  char* base = ctx.moe_router.reserve(kCounterBytes + bytes, ctx.stream, "moe_router_route (CUDA)");
  if (base != before) CUDA_OK(cudaMemsetAsync(base, 0, kCounterBytes, ctx.stream));
  return {reinterpret_cast<uint32_t*>(base), reinterpret_cast<float*>(base + kCounterBytes)};
}

}  // namespace

void moe_route(CudaContext& ctx, const TensorView& router_logits, const TensorView& bias,
               const RouterParams& params, const TensorView& ids, const TensorView& weights) {
  launch_route(ctx, router_logits.as<float>(), 1, router_logits.dim(0), router_logits.dim(1), bias,
               params, ids, weights);
}

void moe_router_route(CudaContext& ctx, const TensorView& x, const TensorView& router_w,
                      const TensorView& bias, const RouterParams& params, const TensorView& ids,
                      const TensorView& weights) {
  const int64_t T = x.dim(0), H = x.dim(1), E = router_w.dim(0);
  if (T == 0) return;
  check_route_limits(E, params);
  // Reserved for kMoeRouterFusedMaxTokens at the scalar split (the most partials) at least, so
  // decode batches of any size up to it never grow the scratch (CUDA graphs).
  const size_t fused_bytes =
      static_cast<size_t>(ceil_div(H, split_len<1>()) * kMoeRouterFusedMaxTokens * E) *
      sizeof(float);
  const size_t logit_bytes = static_cast<size_t>(T * E) * sizeof(float);
  const RouterScratch scratch = reserve_router_scratch(ctx, std::max(fused_bytes, logit_bytes));
  if (H == 0) {  // empty sums
    CUDA_OK(cudaMemsetAsync(scratch.logits, 0, logit_bytes, ctx.stream));
    launch_route(ctx, scratch.logits, 1, T, E, bias, params, ids, weights);
    return;
  }
  if (T > kMoeRouterFusedMaxTokens) {  // cuBLASLt's fp32 GEMM, then the routing
    const TensorView logits{scratch.logits, DType::kF32, Shape{T, E}, Device::kCuda};
    linear(ctx, x, router_w, logits);
    launch_route(ctx, scratch.logits, 1, T, E, bias, params, ids, weights);
    return;
  }
  const bool vec = H % 4 == 0 && reinterpret_cast<uintptr_t>(x.data) % 8 == 0 &&
                   reinterpret_cast<uintptr_t>(router_w.data) % 16 == 0;
  const int64_t splits = ceil_div(H, vec ? split_len<4>() : split_len<1>());
  const int64_t blocks = ceil_div(E, int64_t{kLogitWarps} * kLogitExpertsPerWarp);
  const int64_t tile = tile_tokens(E);
  const int64_t tiles = ceil_div(T, tile);
  BEAM_CHECK(blocks * splits <= INT32_MAX && splits <= 65535 && tiles <= 65535 &&
             static_cast<size_t>(tiles) * sizeof(uint32_t) <= kCounterBytes)
      << "moe_router_route (CUDA): " << E << " experts, hidden " << H << ", " << T << " tokens";
  FusedArgs a{
      static_cast<const __nv_bfloat16*>(x.data),
      router_w.as<float>(),
      H,
      tile,
      scratch.counters,
      route_args(scratch.logits, static_cast<int>(splits), T, E, bias, params, ids, weights)};
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(splits),
                  static_cast<unsigned>(tiles));
  const size_t smem = static_cast<size_t>(std::min(tile, T) * 2 * E) * sizeof(float);
  if (vec) {
    router_route_kernel<4><<<grid, kLogitWarps * 32, smem, ctx.stream>>>(a);
  } else {
    router_route_kernel<1><<<grid, kLogitWarps * 32, smem, ctx.stream>>>(a);
  }
  CUDA_LAUNCH_OK();
}

}  // namespace beam::cuda
