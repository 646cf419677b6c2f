// CUDA elementwise ops with kernels/cpu/activation.cpp's rounding points (BEAM.md §3.7 gate, §3.9
// SwiGLU, §3.11 softcap, the drafter's rounded add). exp/tanh are CUDA's accurate fp32 functions,
// not SLEEF's: a value may differ from the CPU's by an fp32 ulp before its bf16 rounding (rarely
// visible after it).
#include "kernels/cuda/activation.h"

#include <algorithm>
#include <cstdio>

#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/gate_math.cuh"

namespace beam::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 16;  // grid-stride loops: enough blocks to fill every SM

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks for a grid-stride loop over num_items items (num_items > 0).
unsigned grid_for(const CudaContext& ctx, int64_t num_items) {
  const int64_t cap = std::max<int64_t>(1, int64_t{ctx.props.multiProcessorCount} * kBlocksPerSm);
  return static_cast<unsigned>(std::clamp<int64_t>(ceil_div(num_items, kThreads), 1, cap));
}

__device__ __forceinline__ int64_t first_item() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t item_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// o = bf16(o * bf16(sigmoid(bf16(g + b[head])))) (gate_math.cuh); a pack never crosses a head
// (N divides D).
template <int N>
__global__ void output_gate_packs(bf16_t* o, const bf16_t* g, const bf16_t* bias,
                                  int64_t num_packs, int64_t width, int64_t head_dim) {
  for (int64_t p = first_item(); p < num_packs; p += item_stride()) {
    const int64_t off = p * N;
    const float b = to_f32(bias[(off % width) / head_dim]);
    const Pack<N> gp = load_bf16<N>(g + off);
    Pack<N> op = load_bf16<N>(o + off);
#pragma unroll
    for (int i = 0; i < N; ++i) op.v[i] = apply_output_gate(op.v[i], gp.v[i], b);
    store_bf16<N>(o + off, op);
  }
}

// act[t, i] = bf16(silu(gate[t, i]) * up[t, i]), gate_up [T, 2I] = [gate | up]; N divides I.
template <int N>
__global__ void swiglu_packs(const bf16_t* gate_up, bf16_t* act, int64_t num_packs,
                             int64_t inter) {
  for (int64_t p = first_item(); p < num_packs; p += item_stride()) {
    const int64_t off = p * N, t = off / inter, col = off % inter;
    const Pack<N> gate = load_bf16<N>(gate_up + t * 2 * inter + col);
    const Pack<N> up = load_bf16<N>(gate_up + t * 2 * inter + inter + col);
    Pack<N> out;
#pragma unroll
    for (int i = 0; i < N; ++i) out.v[i] = gate.v[i] / (1.0f + expf(-gate.v[i])) * up.v[i];
    store_bf16<N>(act + off, out);
  }
}

// x = f32(z) * multiplier; logits = cap * tanh(x / cap) in fp32, or x when cap <= 0; N == 8
// stores 2 float4.
template <int N>
__global__ void softcap_packs(const bf16_t* z, float* logits, int64_t num_packs, float cap,
                              float multiplier) {
  for (int64_t p = first_item(); p < num_packs; p += item_stride()) {
    Pack<N> x = load_bf16<N>(z + p * N);
#pragma unroll
    for (int i = 0; i < N; ++i) x.v[i] = __fmul_rn(x.v[i], multiplier);
    if (cap > 0.0f) {
#pragma unroll
      for (int i = 0; i < N; ++i) x.v[i] = __fmul_rn(cap, tanhf(__fdiv_rn(x.v[i], cap)));
    }
    if constexpr (N == 8) {
      float4* dst = reinterpret_cast<float4*>(logits + p * N);
      dst[0] = make_float4(x.v[0], x.v[1], x.v[2], x.v[3]);
      dst[1] = make_float4(x.v[4], x.v[5], x.v[6], x.v[7]);
    } else {
      logits[p] = x.v[0];
    }
  }
}

// out = bf16(f32(a) + f32(b)); each element is read before it is written, so out may alias a or b.
template <int N>
__global__ void add_rounded_packs(const bf16_t* a, const bf16_t* b, bf16_t* out,
                                  int64_t num_packs) {
  for (int64_t p = first_item(); p < num_packs; p += item_stride()) {
    Pack<N> x = load_bf16<N>(a + p * N);
    const Pack<N> y = load_bf16<N>(b + p * N);
#pragma unroll
    for (int i = 0; i < N; ++i) x.v[i] = __fadd_rn(x.v[i], y.v[i]);
    store_bf16<N>(out + p * N, x);
  }
}

// One block per output row: out[t] = table[ids[t]], copied in units of Unit (uint4 or bf16).
template <typename Unit>
__global__ void gather_rows(const Unit* table, const int32_t* ids, Unit* out, int64_t num_rows,
                            int64_t units_per_row) {
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  if (id < 0 || id >= num_rows) {
    if (threadIdx.x == 0)
      printf("embedding: id %d at row %lld outside the table of %lld rows\n", id,
             static_cast<long long>(t), static_cast<long long>(num_rows));
    __trap();
  }
  const Unit* src = table + id * units_per_row;
  Unit* dst = out + t * units_per_row;
  for (int64_t u = threadIdx.x; u < units_per_row; u += blockDim.x) dst[u] = src[u];
}

}  // namespace

void output_gate(CudaContext& ctx, const TensorView& o, const TensorView& g,
                 const TensorView& bias) {
  const int64_t width = o.dim(1), head_dim = width / bias.dim(0), n = o.numel();
  if (n == 0) return;
  auto* op = static_cast<bf16_t*>(o.data);
  const auto* gp = static_cast<const bf16_t*>(g.data);
  const auto* bp = static_cast<const bf16_t*>(bias.data);
  if (head_dim % 8 == 0 && all_aligned16(op, gp)) {
    output_gate_packs<8><<<grid_for(ctx, n / 8), kThreads, 0, ctx.stream>>>(op, gp, bp, n / 8,
                                                                           width, head_dim);
  } else {
    output_gate_packs<1><<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(op, gp, bp, n, width,
                                                                       head_dim);
  }
  CUDA_LAUNCH_OK();
}

void swiglu(CudaContext& ctx, const TensorView& gate_up, const TensorView& act) {
  const int64_t inter = act.dim(1), n = act.numel();
  if (n == 0) return;
  const auto* gu = static_cast<const bf16_t*>(gate_up.data);
  auto* ap = static_cast<bf16_t*>(act.data);
  if (inter % 8 == 0 && all_aligned16(gu, ap)) {
    swiglu_packs<8><<<grid_for(ctx, n / 8), kThreads, 0, ctx.stream>>>(gu, ap, n / 8, inter);
  } else {
    swiglu_packs<1><<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(gu, ap, n, inter);
  }
  CUDA_LAUNCH_OK();
}

void softcap(CudaContext& ctx, const TensorView& z, float cap, float multiplier,
             const TensorView& logits) {
  const int64_t n = z.numel();
  if (n == 0) return;
  const auto* zp = static_cast<const bf16_t*>(z.data);
  auto* lp = static_cast<float*>(logits.data);
  if (n % 8 == 0 && all_aligned16(zp, lp)) {
    softcap_packs<8><<<grid_for(ctx, n / 8), kThreads, 0, ctx.stream>>>(zp, lp, n / 8, cap,
                                                                       multiplier);
  } else {
    softcap_packs<1><<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(zp, lp, n, cap, multiplier);
  }
  CUDA_LAUNCH_OK();
}

void add_rounded(CudaContext& ctx, const TensorView& a, const TensorView& b,
                 const TensorView& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const auto* ap = static_cast<const bf16_t*>(a.data);
  const auto* bp = static_cast<const bf16_t*>(b.data);
  auto* op = static_cast<bf16_t*>(out.data);
  if (n % 8 == 0 && all_aligned16(ap, bp, op)) {
    add_rounded_packs<8><<<grid_for(ctx, n / 8), kThreads, 0, ctx.stream>>>(ap, bp, op, n / 8);
  } else {
    add_rounded_packs<1><<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(ap, bp, op, n);
  }
  CUDA_LAUNCH_OK();
}

void embedding(CudaContext& ctx, const TensorView& table, const TensorView& ids,
               const TensorView& out) {
  const int64_t T = ids.dim(0), num_rows = table.dim(0), H = table.dim(1);
  if (T == 0 || H == 0) return;
  const auto* idp = static_cast<const int32_t*>(ids.data);
  const unsigned blocks = static_cast<unsigned>(T);
  if (H % 8 == 0 && all_aligned16(table.data, out.data)) {
    const int64_t units = H / 8;
    const int threads = static_cast<int>(std::min<int64_t>(512, ceil_div(units, 32) * 32));
    gather_rows<uint4><<<blocks, threads, 0, ctx.stream>>>(
        static_cast<const uint4*>(table.data), idp, static_cast<uint4*>(out.data), num_rows, units);
  } else {
    const int threads = static_cast<int>(std::min<int64_t>(512, ceil_div(H, 32) * 32));
    gather_rows<bf16_t><<<blocks, threads, 0, ctx.stream>>>(
        static_cast<const bf16_t*>(table.data), idp, static_cast<bf16_t*>(out.data), num_rows, H);
  }
  CUDA_LAUNCH_OK();
}

}  // namespace beam::cuda
