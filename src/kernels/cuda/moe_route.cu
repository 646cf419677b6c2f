// CUDA grouped sigmoid "noaux_tc" routing (BEAM.md §3.10) with kernels/cpu/moe_route.cpp's fp32
// operations in the same order: one warp per token; groups and experts are picked by rounds of
// warp-wide argmax under the CPU's order (higher value first, equal values by lower index), so
// ids are identical and weights bit-identical (sigmoid through torch_exp.cuh's SLEEF-exact exp).
// Also moe_router_route: for small T the fp32 router GEMM as split-K partial sums over all SMs,
// which the route kernel adds in split order (no atomics); for large T linear() + moe_route.
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

constexpr int kMaxWarpsPerBlock = 4;
constexpr int64_t kMaxExperts = 32 * 64;  // each lane's exclusion bits fit one uint64_t
constexpr int64_t kMaxGroups = 32;        // one group per lane
constexpr int64_t kMaxTopK = 32;          // lane k holds the k-th choice
constexpr size_t kSmemBudget = 48 * 1024;

struct RouteArgs {
  const float* logits;  // [num_partials, T, E]: the logits are the partials' sum in index order
  int num_partials;
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
  const int64_t partial_stride = a.num_tokens * E;
  for (int e = lane; e < E; e += 32) {
    float logit = logits[e];
    for (int s = 1; s < a.num_partials; ++s)
      logit = __fadd_rn(logit, logits[s * partial_stride + e]);
    score[e] = torch_exp::sigmoidf(logit);
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

// Routes T tokens from `num_partials` fp32 logit arrays [num_partials, T, E] (summed in order).
void launch_route(CudaContext& ctx, const float* logits, int num_partials, int64_t T, int64_t E,
                  const TensorView& bias, const RouterParams& params, const TensorView& ids,
                  const TensorView& weights) {
  BEAM_CHECK(E <= kMaxExperts && params.num_groups <= kMaxGroups && params.top_k <= kMaxTopK)
      << "moe_route (CUDA): " << E << " experts, " << params.num_groups << " groups, top_k "
      << params.top_k << " exceed this kernel's limits (" << kMaxExperts << ", " << kMaxGroups
      << ", " << kMaxTopK << ")";
  if (T == 0) return;
  const size_t warp_smem = static_cast<size_t>(2 * E) * sizeof(float);
  const int warps =
      static_cast<int>(std::clamp<size_t>(kSmemBudget / warp_smem, 1, size_t{kMaxWarpsPerBlock}));
  RouteArgs a{logits,
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
  const int64_t blocks = (T + warps - 1) / warps;
  BEAM_CHECK(blocks <= INT32_MAX) << "moe_route (CUDA): " << T << " tokens";
  route_kernel<<<static_cast<unsigned>(blocks), warps * 32, warps * warp_smem, ctx.stream>>>(a);
  CUDA_LAUNCH_OK();
}

// ---- router logits for small T: split-K partial sums ------------------------------------------

constexpr int kLogitWarps = 8;           // warps per block
constexpr int kLogitExpertsPerWarp = 2;  // router rows a warp holds in registers
constexpr int kLogitChunksPerLane = 5;   // kVec-wide chunks per lane and row (5120 = 8 x 640)
constexpr int kLogitTokensPerBlock = 32;  // tokens of one block (grid.z: more blocks at larger T)

struct LogitArgs {
  const __nv_bfloat16* x;  // [T, H]
  const float* w;          // [E, H]
  int64_t T, E, H;
  float* partial;  // [gridDim.y, T, E]: partial[s] sums columns [s L, (s + 1) L), L = split_len
};

template <int kVec>
constexpr int64_t split_len() {
  return int64_t{32} * kVec * kLogitChunksPerLane;
}

// Block (b, s, z): tokens [z kLogitTokensPerBlock, ...); warp w holds router rows
// e0 = (b kLogitWarps + w) kLogitExpertsPerWarp and e0 + 1, columns [s L, (s + 1) L), in
// registers and for each token t writes partial[s, t, e] = Σ f32(x[t, c]) * w[e, c] (fp32 fma per
// lane in column order, then a fixed butterfly).
template <int kVec>
__global__ void __launch_bounds__(kLogitWarps * 32) router_logits_kernel(LogitArgs a) {
  constexpr int R = kLogitExpertsPerWarp, C = kLogitChunksPerLane;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t e0 = (static_cast<int64_t>(blockIdx.x) * kLogitWarps + warp) * R;
  if (e0 >= a.E) return;  // no block-wide synchronisation in this kernel
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * split_len<kVec>();
  float wv[R][C][kVec];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float* row = a.w + (e0 + r < a.E ? e0 + r : e0) * a.H;  // a row past E: never stored
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
  float* out = a.partial + static_cast<int64_t>(blockIdx.y) * a.T * a.E;
  const int64_t t0 = static_cast<int64_t>(blockIdx.z) * kLogitTokensPerBlock;
  const int64_t t1 = t0 + kLogitTokensPerBlock < a.T ? t0 + kLogitTokensPerBlock : a.T;
  for (int64_t t = t0; t < t1; ++t) {
    const __nv_bfloat16* xt = a.x + t * a.H;
    float acc[R] = {};
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int64_t k = k0 + (static_cast<int64_t>(c) * 32 + lane) * kVec;
      if (k >= a.H) break;
      float xv[kVec];
      if constexpr (kVec == 4) {
        const uint2 raw = __ldg(reinterpret_cast<const uint2*>(xt + k));
        xv[0] = __uint_as_float(raw.x << 16);
        xv[1] = __uint_as_float(raw.x & 0xffff0000u);
        xv[2] = __uint_as_float(raw.y << 16);
        xv[3] = __uint_as_float(raw.y & 0xffff0000u);
      } else {
        xv[0] = __bfloat162float(xt[k]);
      }
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int i = 0; i < kVec; ++i) acc[r] = __fmaf_rn(xv[i], wv[r][c][i], acc[r]);
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1)
        acc[r] = __fadd_rn(acc[r], __shfl_xor_sync(0xffffffffu, acc[r], offset));
      if (lane == r && e0 + r < a.E) out[t * a.E + e0 + r] = acc[r];
    }
  }
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
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
  // Reserved for kMoeRouterFusedMaxTokens at the scalar split (the most partials) at least, so
  // decode batches of any size up to it never grow the scratch (CUDA graphs).
  const size_t fused_bytes = static_cast<size_t>(ceil_div(H, split_len<1>()) *
                                                 kMoeRouterFusedMaxTokens * E) * sizeof(float);
  const size_t logit_bytes = static_cast<size_t>(T * E) * sizeof(float);
  auto* scratch = reinterpret_cast<float*>(ctx.moe_router.reserve(
      std::max(fused_bytes, logit_bytes), ctx.stream, "moe_router_route (CUDA)"));
  if (H == 0) {  // empty sums
    CUDA_OK(cudaMemsetAsync(scratch, 0, logit_bytes, ctx.stream));
    launch_route(ctx, scratch, 1, T, E, bias, params, ids, weights);
    return;
  }
  if (T > kMoeRouterFusedMaxTokens) {  // cuBLASLt's fp32 GEMM, then the routing
    const TensorView logits{scratch, DType::kF32, Shape{T, E}, Device::kCuda};
    linear(ctx, x, router_w, logits);
    launch_route(ctx, scratch, 1, T, E, bias, params, ids, weights);
    return;
  }
  const LogitArgs a{static_cast<const __nv_bfloat16*>(x.data), router_w.as<float>(), T, E, H,
                    scratch};
  const bool vec = H % 4 == 0 && reinterpret_cast<uintptr_t>(x.data) % 8 == 0 &&
                   reinterpret_cast<uintptr_t>(router_w.data) % 16 == 0;
  const int64_t splits = ceil_div(H, vec ? split_len<4>() : split_len<1>());
  const int64_t blocks = ceil_div(E, int64_t{kLogitWarps} * kLogitExpertsPerWarp);
  BEAM_CHECK(blocks <= INT32_MAX && splits <= 65535)
      << "moe_router_route (CUDA): " << E << " experts, hidden " << H;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(splits),
                  static_cast<unsigned>(ceil_div(T, kLogitTokensPerBlock)));
  if (vec) {
    router_logits_kernel<4><<<grid, kLogitWarps * 32, 0, ctx.stream>>>(a);
  } else {
    router_logits_kernel<1><<<grid, kLogitWarps * 32, 0, ctx.stream>>>(a);
  }
  CUDA_LAUNCH_OK();
  launch_route(ctx, scratch, static_cast<int>(splits), T, E, bias, params, ids, weights);
}

}  // namespace beam::cuda
