// The routed experts' LoRA kernels (moe_lora.cuh). Shrink: one warp per (visited slot, part,
// rank index j), its lanes striding the input row (8 elements a 16-byte load where the width
// allows, four loads in flight) and summed by a fixed butterfly. Expand: one thread per (visited
// slot, output column), the slot's h staged in shared memory and the column's row of B read in j
// order. Neither sum depends on the batch, the order of the visit or the run.
#include "kernels/cuda/check.h"
#include "kernels/cuda/moe_lora.cuh"

namespace beam::cuda::moe_lora {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxParts = 2;
constexpr unsigned kMaxGridY = 65535;

// Routed slot i's place: its token t, expert e and the token's adapter slot s.
struct Slot {
  int64_t i = -1;
  int t = 0, e = -1, s = -1;
  __device__ bool has_lora() const { return i >= 0 && e >= 0 && s >= 0; }
};

// The slot that block row b visits (Rows::order).
__device__ __forceinline__ Slot slot_of(const Rows& r, int64_t b) {
  Slot v;
  v.i = r.order ? r.order[b] : b;
  if (v.i < 0) return v;
  v.t = static_cast<int>(v.i / r.top_k);
  v.e = r.ids[v.i];
  v.s = r.slots[v.t];
  return v;
}

// acc + Σ_u x[u] · f32(w[u]) over 8 elements in order (w 16-byte aligned).
__device__ __forceinline__ float fma8(const float* x, const bf16_t* w, float acc) {
  const uint4 v = *reinterpret_cast<const uint4*>(w);
  const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const float2 f = __bfloat1622float2(pairs[u]);
    acc = __fmaf_rn(x[2 * u], f.x, acc);
    acc = __fmaf_rn(x[2 * u + 1], f.y, acc);
  }
  return acc;
}

// acc + Σ_u f32(x[u]) · f32(w[u]) over 8 elements in order (both 16-byte aligned).
__device__ __forceinline__ float fma8(const bf16_t* x, const bf16_t* w, float acc) {
  const uint4 xv = __ldg(reinterpret_cast<const uint4*>(x));
  const uint4 wv = *reinterpret_cast<const uint4*>(w);
  const auto* xp = reinterpret_cast<const __nv_bfloat162*>(&xv);
  const auto* wp = reinterpret_cast<const __nv_bfloat162*>(&wv);
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const float2 a = __bfloat1622float2(xp[u]), b = __bfloat1622float2(wp[u]);
    acc = __fmaf_rn(a.x, b.x, acc);
    acc = __fmaf_rn(a.y, b.y, acc);
  }
  return acc;
}

struct ShrinkArgs {
  const bf16_t* in;
  const int32_t* in_row_of;
  int64_t k;
  const bf16_t* a[kMaxParts];     // [E, S, r, k]
  const float* scale[kMaxParts];  // [S]
  int parts, num_slots, rank;
  Rows rows;
  float* h;
  bool vector_loads;  // k % 8 == 0, in and every A 16-byte aligned
};

// Grid: x = block row, y = chunk of kWarps (part, j) pairs, one a warp.
__global__ void __launch_bounds__(kThreads) shrink_kernel(const ShrinkArgs p) {
  const Slot v = slot_of(p.rows, blockIdx.x);
  const int q = static_cast<int>(blockIdx.y) * kWarps + static_cast<int>(threadIdx.x) / 32;
  if (!v.has_lora() || q >= p.parts * p.rank) return;
  const int lane = static_cast<int>(threadIdx.x) % 32, part = q / p.rank, j = q % p.rank;
  const int64_t src = p.in_row_of ? p.in_row_of[v.i] : v.t;
  const bf16_t* in = p.in + src * p.k;
  // (selects, not p.a[part]: a dynamic index into the parameters copies them to the stack)
  const bf16_t* a = (part == 0 ? p.a[0] : p.a[1]) +
                    ((static_cast<int64_t>(v.e) * p.num_slots + v.s) * p.rank + j) * p.k;
  float acc = 0.0f;
  if (p.vector_loads) {
#pragma unroll 4
    for (int64_t c = 8 * lane; c < p.k; c += 8 * 32) acc = fma8(in + c, a + c, acc);
  } else {
    for (int64_t c = lane; c < p.k; c += 32)
      acc = __fmaf_rn(__bfloat162float(in[c]), __bfloat162float(a[c]), acc);
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0)
    p.h[v.i * p.parts * p.rank + q] = __fmul_rn((part == 0 ? p.scale[0] : p.scale[1])[v.s], acc);
}

// Σ_j h[j] · f32(b_row[j]) in j order over the rank (b_row: one output column's row of B).
__device__ __forceinline__ float expand(const float* h, const bf16_t* b_row, int rank) {
  float acc = 0.0f;
  if (rank % 8 == 0) {  // 16-byte rows (the stacks are 256-byte aligned)
    for (int j = 0; j < rank; j += 8) acc = fma8(h + j, b_row + j, acc);
  } else {
    for (int j = 0; j < rank; ++j) acc = __fmaf_rn(h[j], __bfloat162float(b_row[j]), acc);
  }
  return acc;
}

struct ExpandArgs {
  const float* h;              // [T * top_k, parts * r]
  const bf16_t* b[kMaxParts];  // [E, S, n, r]
  int parts, num_slots, rank;
  int64_t n;
  Rows rows;
  float* delta;               // kAdd false: [T * top_k, parts, n] (has: [rows, parts, n])
  int32_t* has;               // kAdd false: nullptr, or [rows] whether block row b has deltas
  const int32_t* out_row_of;  // kAdd: y row of each slot
  bf16_t* y;                  // kAdd: [.., n]
};

// Grid: x = block row, y = chunk of kThreads of the parts * n (part, column) pairs, one a thread.
// Dynamic shared memory: the slot's h (parts * r floats).
template <bool kAdd>
__global__ void __launch_bounds__(kThreads) expand_kernel(const ExpandArgs p) {
  extern __shared__ float h[];
  const Slot v = slot_of(p.rows, blockIdx.x);
  if (!kAdd && p.has != nullptr && blockIdx.y == 0 && threadIdx.x == 0)
    p.has[blockIdx.x] = v.has_lora() ? 1 : 0;
  if (!v.has_lora()) return;
  const int width = p.parts * p.rank;
  for (int c = static_cast<int>(threadIdx.x); c < width; c += kThreads) h[c] = p.h[v.i * width + c];
  __syncthreads();
  const int64_t flat = static_cast<int64_t>(blockIdx.y) * kThreads + threadIdx.x;
  if (flat >= p.parts * p.n) return;
  const int part = flat >= p.n ? 1 : 0;
  const int64_t col = flat - part * p.n;
  const bf16_t* b = (part == 0 ? p.b[0] : p.b[1]) +
                    ((static_cast<int64_t>(v.e) * p.num_slots + v.s) * p.n + col) * p.rank;
  const float d = expand(h + part * p.rank, b, p.rank);
  if constexpr (kAdd) {
    bf16_t* y = p.y + static_cast<int64_t>(p.out_row_of[v.i]) * p.n + col;
    *y = __float2bfloat16_rn(__fadd_rn(__bfloat162float(*y), d));
  } else {
    const int64_t row = p.has != nullptr ? static_cast<int64_t>(blockIdx.x) : v.i;
    p.delta[row * p.parts * p.n + flat] = d;
  }
}

template <bool kAdd>
void launch_expand_kernel(CudaContext& ctx, const ExpandArgs& p) {
  if (p.rows.count == 0 || p.rank == 0 || p.n == 0) return;
  const int64_t chunks = (p.parts * p.n + kThreads - 1) / kThreads;
  BEAM_CHECK(chunks <= kMaxGridY && p.rows.count <= INT32_MAX)
      << "moe_lora: expand grid " << p.rows.count << " x " << chunks << " too large";
  const size_t smem = static_cast<size_t>(p.parts * p.rank) * sizeof(float);
  expand_kernel<kAdd><<<dim3(static_cast<unsigned>(p.rows.count), static_cast<unsigned>(chunks)),
                        kThreads, smem, ctx.stream>>>(p);
  CUDA_LAUNCH_OK();
}

ExpandArgs expand_args(const ExpertLoraStack* const* parts, int num_parts, const Rows& rows,
                       const float* h) {
  ExpandArgs p{};
  p.h = h;
  p.parts = num_parts;
  p.num_slots = static_cast<int>(parts[0]->b.dim(1));
  p.n = parts[0]->b.dim(2);
  p.rank = static_cast<int>(parts[0]->b.dim(3));
  p.rows = rows;
  for (int i = 0; i < num_parts; ++i) p.b[i] = static_cast<const bf16_t*>(parts[i]->b.data);
  return p;
}

bool aligned16(const void* ptr) {
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
}

}  // namespace

void launch_shrink(CudaContext& ctx, const bf16_t* in, const int32_t* in_row_of, int64_t k,
                   const ExpertLoraStack* const* parts, int num_parts, const Rows& rows, float* h) {
  BEAM_CHECK(num_parts >= 1 && num_parts <= kMaxParts) << "moe_lora: " << num_parts << " parts";
  ShrinkArgs p{};
  p.in = in;
  p.in_row_of = in_row_of;
  p.k = k;
  p.parts = num_parts;
  p.num_slots = static_cast<int>(parts[0]->a.dim(1));
  p.rank = static_cast<int>(parts[0]->a.dim(2));
  p.rows = rows;
  p.h = h;
  p.vector_loads = k % 8 == 0 && aligned16(in);
  for (int i = 0; i < num_parts; ++i) {
    p.a[i] = static_cast<const bf16_t*>(parts[i]->a.data);
    p.scale[i] = parts[i]->scale.as<float>();
    p.vector_loads = p.vector_loads && aligned16(p.a[i]);
  }
  if (rows.count == 0 || p.rank == 0) return;
  const int64_t chunks = (num_parts * p.rank + kWarps - 1) / kWarps;
  BEAM_CHECK(rows.count <= INT32_MAX && chunks <= kMaxGridY)
      << "moe_lora: shrink grid " << rows.count << " x " << chunks << " too large";
  shrink_kernel<<<dim3(static_cast<unsigned>(rows.count), static_cast<unsigned>(chunks)), kThreads,
                  0, ctx.stream>>>(p);
  CUDA_LAUNCH_OK();
}

void launch_expand(CudaContext& ctx, const float* h, const ExpertLoraStack& gate,
                   const ExpertLoraStack& up, const Rows& rows, float* delta, int32_t* has) {
  const ExpertLoraStack* parts[] = {&gate, &up};
  ExpandArgs p = expand_args(parts, 2, rows, h);
  p.delta = delta;
  p.has = has;
  launch_expand_kernel<false>(ctx, p);
}

void launch_expand_add(CudaContext& ctx, const float* h, const ExpertLoraStack& down,
                       const Rows& rows, const int32_t* out_row_of, bf16_t* y) {
  const ExpertLoraStack* parts[] = {&down};
  ExpandArgs p = expand_args(parts, 1, rows, h);
  p.out_row_of = out_row_of;
  p.y = y;
  launch_expand_kernel<true>(ctx, p);
}

}  // namespace beam::cuda::moe_lora
