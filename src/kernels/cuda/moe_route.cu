// CUDA grouped sigmoid "noaux_tc" routing (BEAM.md §3.10): moe_route routes given fp32 logits,
// one block per token (moe_route_block.cuh: ids identical to kernels/cpu/moe_route.cpp's, weights
// bit-identical). moe_router_route also computes the logits: up to kMoeRouterFusedMaxTokens
// tokens one kernel does the fp32 router GEMM on tensor cores (each fp32 weight split exactly
// into three bf16 terms, bf16 x exact) as split-K partial sums over all SMs, and the last blocks
// to finish (a ticket counter that they reset, so graph replays work) add the partials in split
// order (no float atomics) and route the tokens, one each up to the grid's size; for larger T
// the same split as three bf16 cuBLASLt GEMMs (linear()'s fp32 GEMM where H % 8 != 0), then
// moe_route over the partials.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/check.h"
#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/mma_sync.cuh"
#include "kernels/cuda/moe.h"
#include "kernels/cuda/moe_route_block.cuh"

namespace beam::cuda {
namespace {

using route::RouteArgs;
using bf16_t = __nv_bfloat16;

// Block b routes token b.
__global__ void __launch_bounds__(route::kThreads) route_kernel(RouteArgs a) {
  __shared__ route::RouteSmem smem;
  route::route_token(a, blockIdx.x, route::expert_bias(a), smem);
}

void check_route_limits(int64_t E, const RouterParams& params) {
  BEAM_CHECK(E <= route::kMaxExperts && params.num_groups <= route::kMaxGroups &&
             params.top_k <= route::kMaxTopK)
      << "moe_route (CUDA): " << E << " experts, " << params.num_groups << " groups, top_k "
      << params.top_k << " exceed this kernel's limits (<= " << route::kMaxExperts
      << " experts, <= " << route::kMaxGroups << " groups, top_k <= " << route::kMaxTopK << ")";
}

// active: empty or [1] i32 (kernels/api/moe.h's moe_router_route), counting tokens from
// first_token tokens before this call's first.
RouteArgs route_args(const float* logits, int num_partials, int64_t T, int64_t E,
                     const TensorView& bias, const RouterParams& params, const TensorView& ids,
                     const TensorView& weights, const TensorView& active,
                     int64_t first_token = 0) {
  const int64_t group_size = E / params.num_groups;
  return RouteArgs{logits,
                   num_partials,
                   bias.as<float>(),
                   ids.as<int32_t>(),
                   weights.as<float>(),
                   T,
                   active.as<const int32_t>(),
                   first_token,
                   static_cast<int>(E),
                   static_cast<int>(group_size),
                   static_cast<int>(params.num_groups),
                   static_cast<int>(params.topk_groups),
                   static_cast<int>(params.top_k),
                   params.norm_topk_prob,
                   params.routed_scaling_factor};
}

// Routes T tokens from fp32 logits: the sums of num_partials partials [num_partials, T, E].
void launch_route(CudaContext& ctx, const float* logits, int num_partials, int64_t T, int64_t E,
                  const TensorView& bias, const RouterParams& params, const TensorView& ids,
                  const TensorView& weights, const TensorView& active) {
  check_route_limits(E, params);
  if (T == 0) return;
  const RouteArgs a = route_args(logits, num_partials, T, E, bias, params, ids, weights, active);
  BEAM_CHECK(T <= INT32_MAX) << "moe_route (CUDA): " << T << " tokens";
  route_kernel<<<static_cast<unsigned>(T), route::kThreads, 0, ctx.stream>>>(a);
  CUDA_LAUNCH_OK();
}

// ---- moe_router_route for small T: tensor-core split-K logits and routing in one kernel --------

constexpr int kGemmWarps = 8;     // warps of a block: consecutive K ranges of one 16-expert tile
constexpr int kStepsPerWarp = 5;  // k16 steps of a warp (its A fragments stay in registers)
constexpr int64_t kSplitCols = int64_t{kGemmWarps} * kStepsPerWarp * 16;  // 640 (5120 = 8 x 640)
constexpr int kPassTiles = 8;             // n8 token tiles of one pass (x and sums in registers)
constexpr int kPassTokens = kPassTiles * 8;  // 64
constexpr int kRedStride = 20;  // floats per token in the cross-warp buffer (16 used; the
                                // fragment stores hit 32 distinct banks)
constexpr size_t kCounterBytes = 512;  // ticket counters ahead of the partial sums
static_assert(kGemmWarps * 32 == route::kThreads, "a GEMM block is a routing block");

struct FusedArgs {
  const __nv_bfloat16* x;  // [T, H]
  const float* w;          // [E, H]
  int64_t H;
  uint32_t* counters;  // [0] blocks done, [1] routing blocks past their wait; zero between launches
  int routers;         // the last `routers` blocks to finish route tokens r, r + routers, ...
  RouteArgs route;     // route.logits: partial[gridDim.y, T, E], split s sums columns
                       // [s kSplitCols, (s + 1) kSplitCols)
};

// w[row, k .. k + 3] (zeros past E or H). kVec: H % 4 == 0 and w 16-byte aligned.
template <bool kVec>
__device__ __forceinline__ float4 load_w4(const FusedArgs& a, int64_t row, int64_t k) {
  float4 v{0.0f, 0.0f, 0.0f, 0.0f};
  if (row >= a.route.num_experts) return v;
  const float* p = a.w + row * a.H + k;
  if constexpr (kVec) {
    if (k < a.H) v = __ldg(reinterpret_cast<const float4*>(p));
  } else {
    v.x = k < a.H ? __ldg(p) : 0.0f;
    v.y = k + 1 < a.H ? __ldg(p + 1) : 0.0f;
    v.z = k + 2 < a.H ? __ldg(p + 2) : 0.0f;
    v.w = k + 3 < a.H ? __ldg(p + 3) : 0.0f;
  }
  return v;
}

// x[t, k .. k + 3] as two bf16x2 (zeros past T or H). kVec: H % 4 == 0 and x 8-byte aligned.
template <bool kVec>
__device__ __forceinline__ uint2 load_x4(const FusedArgs& a, int64_t t, int64_t k) {
  uint2 v{0u, 0u};
  if (t >= a.route.num_tokens) return v;
  const __nv_bfloat16* p = a.x + t * a.H + k;
  if constexpr (kVec) {
    if (k < a.H) v = __ldg(reinterpret_cast<const uint2*>(p));
  } else {
    const unsigned short* q = reinterpret_cast<const unsigned short*>(p);
    const uint32_t e0 = k < a.H ? __ldg(q) : 0u, e1 = k + 1 < a.H ? __ldg(q + 1) : 0u;
    const uint32_t e2 = k + 2 < a.H ? __ldg(q + 2) : 0u, e3 = k + 3 < a.H ? __ldg(q + 3) : 0u;
    v = {e0 | (e1 << 16), e2 | (e3 << 16)};
  }
  return v;
}

// The warp's A fragments: experts e0 + (0..15) x its kStepsPerWarp k16 steps from column k0, as
// hi / mid / lo bf16 terms. The k order inside a step is permuted (lane quad q holds physical
// columns 4q .. 4q + 3 as logical 2q, 2q + 1, 2q + 8, 2q + 9), the same for x, so the sums are
// the dot products.
template <bool kVec>
__device__ __forceinline__ void load_a(const FusedArgs& a, int64_t e0, int64_t k0, int lane,
                                       uint32_t (&frag)[kStepsPerWarp][3][4]) {
  const int g = lane / 4, q = lane % 4;
  float4 raw[kStepsPerWarp][2];  // all loads in flight before any use
#pragma unroll
  for (int ks = 0; ks < kStepsPerWarp; ++ks) {
    const int64_t k = k0 + ks * 16 + q * 4;
    raw[ks][0] = load_w4<kVec>(a, e0 + g, k);
    raw[ks][1] = load_w4<kVec>(a, e0 + g + 8, k);
  }
#pragma unroll
  for (int ks = 0; ks < kStepsPerWarp; ++ks) {
    const Split3 parts[4] = {split3(raw[ks][0].x, raw[ks][0].y),   // a0a1: expert g
                             split3(raw[ks][1].x, raw[ks][1].y),   // a2a3: expert g + 8
                             split3(raw[ks][0].z, raw[ks][0].w),   // a4a5: expert g
                             split3(raw[ks][1].z, raw[ks][1].w)};  // a6a7: expert g + 8
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      frag[ks][0][i] = parts[i].hi;
      frag[ks][1][i] = parts[i].mid;
      frag[ks][2][i] = parts[i].lo;
    }
  }
}

// One pass over tokens [t0, t0 + kPassTokens) ∩ [0, T): this warp's dot products over its K range
// (per k16 step lo, mid, hi terms accumulated by the tensor core from zero, then added to the
// running fp32 sum in step order) stored to red[warp][token - t0][expert - e0].
template <bool kVec>
__device__ __forceinline__ void warp_pass(const FusedArgs& a,
                                          const uint32_t (&frag)[kStepsPerWarp][3][4], int64_t k0,
                                          int64_t t0, int lane, float* red) {
  const int g = lane / 4, q = lane % 4;
  const int64_t T = a.route.num_tokens;
  uint2 b[kPassTiles][kStepsPerWarp];
#pragma unroll
  for (int n = 0; n < kPassTiles; ++n)
#pragma unroll
    for (int ks = 0; ks < kStepsPerWarp; ++ks)
      b[n][ks] = t0 + n * 8 < T ? load_x4<kVec>(a, t0 + n * 8 + g, k0 + ks * 16 + q * 4)
                                : uint2{0u, 0u};
#pragma unroll
  for (int n = 0; n < kPassTiles; ++n) {
    if (t0 + n * 8 >= T) break;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int ks = 0; ks < kStepsPerWarp; ++ks) {
      float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      mma_bf16(d, frag[ks][2], b[n][ks]);
      mma_bf16(d, frag[ks][1], b[n][ks]);
      mma_bf16(d, frag[ks][0], b[n][ks]);
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[i] = __fadd_rn(acc[i], d[i]);
    }
    // c0: (expert g, token 2q), c1: (g, 2q + 1), c2: (g + 8, 2q), c3: (g + 8, 2q + 1).
    float* row = red + (n * 8 + 2 * q) * kRedStride + g;
    row[0] = acc[0];
    row[kRedStride] = acc[1];
    row[8] = acc[2];
    row[kRedStride + 8] = acc[3];
  }
}

// The block's split-K partial sums: warp w covers columns [k0 + w 80, k0 + (w + 1) 80) of experts
// [e0, e0 + 16); per pass of 64 tokens the warps' sums are added in warp order into
// partial[split, t, e]. Every token's sums are the same whatever T and its place in the batch.
template <bool kVec>
__device__ void block_partials(const FusedArgs& a) {
  __shared__ float red[kGemmWarps][kPassTokens * kRedStride];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t E = a.route.num_experts, T = a.route.num_tokens;
  const int64_t e0 = static_cast<int64_t>(blockIdx.x) * 16;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * kSplitCols +
                     static_cast<int64_t>(warp) * kStepsPerWarp * 16;
  uint32_t frag[kStepsPerWarp][3][4];
  load_a<kVec>(a, e0, k0, lane, frag);  // weights only: before the previous kernel completes
  pdl_wait();
  float* out = const_cast<float*>(a.route.logits) + static_cast<int64_t>(blockIdx.y) * T * E;
  for (int64_t t0 = 0; t0 < T; t0 += kPassTokens) {
    warp_pass<kVec>(a, frag, k0, t0, lane, red[warp]);
    __syncthreads();
    const int n = static_cast<int>(std::min<int64_t>(kPassTokens, T - t0));
    for (int i = static_cast<int>(threadIdx.x); i < n * 16; i += kGemmWarps * 32) {
      const int tl = i / 16, el = i % 16;
      float v = red[0][tl * kRedStride + el];
#pragma unroll
      for (int w = 1; w < kGemmWarps; ++w) v = __fadd_rn(v, red[w][tl * kRedStride + el]);
      if (e0 + el < E) out[(t0 + tl) * E + e0 + el] = v;
    }
    __syncthreads();  // red is rewritten by the next pass
  }
}

__device__ __forceinline__ uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// grid (ceil(E / 16), splits), kGemmWarps * 32 threads. Each block writes its partial sums and
// takes a ticket; the last `routers` blocks wait for every ticket (the blocks still working are
// running or can start: at most routers - 1 <= SMs - 1 wait; the last ticket's holder has seen
// every other and does not), then router r routes tokens r, r + routers, ... (the whole block per
// token), and the last router past the wait resets the counters (a lone router without counting).
template <bool kVec>
__global__ void __launch_bounds__(kGemmWarps * 32, 1) router_route_kernel(FusedArgs a) {
  __shared__ uint32_t ticket;
  __shared__ route::RouteSmem smem;
  block_partials<kVec>(a);
  __threadfence();  // this thread's partial sums are visible device-wide before the ticket
  __syncthreads();
  const uint32_t blocks = gridDim.x * gridDim.y;
  if (threadIdx.x == 0) ticket = atomicAdd(a.counters, 1u);
  __syncthreads();
  const uint32_t mine = ticket;
  if (mine + static_cast<uint32_t>(a.routers) < blocks) return;
  const float bias = route::expert_bias(a.route);  // in flight while the router waits
  if (threadIdx.x == 0) {
    if (mine + 1 < blocks) {
      while (load_acquire(a.counters) < blocks) __nanosleep(64);
    } else {
      __threadfence();  // with the ticket, an acquire: the other blocks' partials are visible
    }
    if (a.routers == 1 || atomicAdd(a.counters + 1, 1u) == static_cast<uint32_t>(a.routers) - 1) {
      a.counters[0] = 0;  // every router is past its wait
      a.counters[1] = 0;
    }
  }
  __syncthreads();
  __threadfence();
  for (int64_t t = blocks - 1 - mine; t < a.route.num_tokens; t += a.routers)
    route::route_token(a.route, t, bias, smem);
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
  char* base = ctx.moe_router.reserve(kCounterBytes + bytes, ctx.stream, "moe_router_route (CUDA)",
                                      kCounterBytes);
  return {reinterpret_cast<uint32_t*>(base), reinterpret_cast<float*>(base + kCounterBytes)};
}

// ---- moe_router_route for large T: the fp32 router GEMM as three bf16 tensor-core GEMMs -------

constexpr int kSplitTerms = 3;  // w = hi + mid + lo exactly (split3)

// The split path's scratch: logits [kSplitTerms, T, E] fp32, then (256-byte aligned) the split
// weights [kSplitTerms, E, H] bf16.
size_t split_logit_bytes(int64_t T, int64_t E) {
  return (static_cast<size_t>(kSplitTerms * T * E) * sizeof(float) + 255) / 256 * 256;
}
size_t split_scratch_bytes(int64_t T, int64_t E, int64_t H) {
  return split_logit_bytes(T, E) + static_cast<size_t>(kSplitTerms * E * H) * sizeof(bf16_t);
}

// Whether the split path takes the router GEMM: 16-byte x and weight rows (H % 8 == 0; so E * H is
// even) and 8-byte aligned weights (float2 loads).
bool split_path(const TensorView& router_w, int64_t H) {
  return H % 8 == 0 && reinterpret_cast<uintptr_t>(router_w.data) % 8 == 0;
}

// w [n] fp32 (n even) -> parts [kSplitTerms, n] bf16: hi, mid, lo with hi + mid + lo == w exactly
// (split3). Grid-stride over the pairs.
__global__ void split_weights_kernel(const float2* __restrict__ w, int64_t pairs,
                                     uint32_t* __restrict__ parts) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < pairs; i += stride) {
    const float2 v = w[i];
    const Split3 s = split3(v.x, v.y);
    parts[i] = s.hi;
    parts[pairs + i] = s.mid;
    parts[2 * pairs + i] = s.lo;
  }
}

// logits [kSplitTerms, T, E] fp32: partial s = x . part_s^T on tensor cores (x bf16, each product
// exact, fp32 accumulation), so their sum in order is the fp32 router GEMM up to the
// accumulation's rounding. Needs split_path; scratch of split_scratch_bytes from logits.
void router_logits_split(CudaContext& ctx, const TensorView& x, const TensorView& router_w,
                         float* logits) {
  const int64_t T = x.dim(0), H = x.dim(1), E = router_w.dim(0);
  auto* parts =
      reinterpret_cast<bf16_t*>(reinterpret_cast<char*>(logits) + split_logit_bytes(T, E));
  const int64_t pairs = E * H / 2;
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>(ceil_div(pairs, kThreads), 4096);
  split_weights_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, ctx.stream>>>(
      reinterpret_cast<const float2*>(router_w.data), pairs, reinterpret_cast<uint32_t*>(parts));
  CUDA_LAUNCH_OK();
  for (int s = 0; s < kSplitTerms; ++s) {
    const TensorView part{parts + s * E * H, DType::kBF16, Shape{E, H}, Device::kCuda};
    const TensorView out{logits + s * T * E, DType::kF32, Shape{T, E}, Device::kCuda};
    linear(ctx, x, part, out);
  }
}

}  // namespace

void moe_route(CudaContext& ctx, const TensorView& router_logits, const TensorView& bias,
               const RouterParams& params, const TensorView& ids, const TensorView& weights) {
  launch_route(ctx, router_logits.as<float>(), 1, router_logits.dim(0), router_logits.dim(1), bias,
               params, ids, weights, TensorView{});
}

namespace {

// moe_router_route's tokens: a whole call (first_token 0) or, batch-invariant, a slice of at most
// kMoeRouterFusedMaxTokens tokens starting at token first_token of the call (active counts those).
void route_tokens(CudaContext& ctx, const TensorView& x, const TensorView& router_w,
                  const TensorView& bias, const RouterParams& params, const TensorView& ids,
                  const TensorView& weights, const TensorView& active, int64_t first_token) {
  const int64_t T = x.dim(0), H = x.dim(1), E = router_w.dim(0);
  // Reserved for kMoeRouterFusedMaxTokens at least, so decode batches of any size up to it never
  // grow the scratch (CUDA graphs).
  const int64_t splits = ceil_div(H, kSplitCols);
  const size_t fused_bytes =
      static_cast<size_t>(splits * kMoeRouterFusedMaxTokens * E) * sizeof(float);
  const size_t logit_bytes = static_cast<size_t>(T * E) * sizeof(float);
  const bool split = T > kMoeRouterFusedMaxTokens && split_path(router_w, H);
  const size_t split_bytes = split ? split_scratch_bytes(T, E, H) : 0;
  const RouterScratch scratch =
      reserve_router_scratch(ctx, std::max({fused_bytes, logit_bytes, split_bytes}));
  if (H == 0) {  // empty sums
    CUDA_OK(cudaMemsetAsync(scratch.logits, 0, logit_bytes, ctx.stream));
    launch_route(ctx, scratch.logits, 1, T, E, bias, params, ids, weights, active);
    return;
  }
  if (split) {  // three bf16 tensor-core GEMMs, then the routing
    router_logits_split(ctx, x, router_w, scratch.logits);
    launch_route(ctx, scratch.logits, kSplitTerms, T, E, bias, params, ids, weights, active);
    return;
  }
  if (T > kMoeRouterFusedMaxTokens) {  // cuBLASLt's fp32 GEMM, then the routing
    const TensorView logits{scratch.logits, DType::kF32, Shape{T, E}, Device::kCuda};
    linear(ctx, x, router_w, logits);
    launch_route(ctx, scratch.logits, 1, T, E, bias, params, ids, weights, active);
    return;
  }
  const bool vec = H % 4 == 0 && reinterpret_cast<uintptr_t>(x.data) % 8 == 0 &&
                   reinterpret_cast<uintptr_t>(router_w.data) % 16 == 0;
  const int64_t blocks = ceil_div(E, 16);
  BEAM_CHECK(splits <= 65535 && blocks * splits <= INT32_MAX)
      << "moe_router_route (CUDA): " << E << " experts, hidden " << H;
  // Routers wait for the grid: fewer than the SMs, so the blocks yet to start find room.
  const int routers = static_cast<int>(
      std::min({blocks * splits, T, int64_t{ctx.props.multiProcessorCount}}));
  const FusedArgs a{static_cast<const __nv_bfloat16*>(x.data),
                    router_w.as<float>(),
                    H,
                    scratch.counters,
                    routers,
                    route_args(scratch.logits, static_cast<int>(splits), T, E, bias, params, ids,
                               weights, active, first_token)};
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(splits));
  // Programmatic: the weights load while the kernel before (x's producer) finishes.
  launch_kernel(ctx, vec ? &router_route_kernel<true> : &router_route_kernel<false>, grid,
                dim3(kGemmWarps * 32), 0, After::kProgrammatic, a);
}

}  // namespace

void moe_router_route(CudaContext& ctx, const TensorView& x, const TensorView& router_w,
                      const TensorView& bias, const RouterParams& params, const TensorView& ids,
                      const TensorView& weights, const TensorView& active, bool invariant) {
  const int64_t T = x.dim(0);
  if (T == 0) return;
  check_route_limits(router_w.dim(0), params);
  if (!invariant || T <= kMoeRouterFusedMaxTokens)
    return route_tokens(ctx, x, router_w, bias, params, ids, weights, active, 0);
  for (int64_t t0 = 0; t0 < T; t0 += kMoeRouterFusedMaxTokens) {  // the fused kernel a slice a time
    const int64_t n = std::min(kMoeRouterFusedMaxTokens, T - t0);
    route_tokens(ctx, x.rows(t0, n), router_w, bias, params, ids.rows(t0, n), weights.rows(t0, n),
                 active, t0);
  }
}

}  // namespace beam::cuda
