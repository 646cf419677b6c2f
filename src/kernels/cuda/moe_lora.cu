// The routed experts' LoRA kernels on CUDA cores (moe_lora.cuh), for slot order (the small-batch
// path) and the shapes the tensor-core ones (moe_lora_mma.cu) do not take. Shrink: one warp per
// (visited slot, part, rank index j), its lanes striding the input row (8 elements a 16-byte load
// where the width allows, four loads in flight) and summed by a fixed butterfly. Expand: one
// thread per (tile of kTile consecutive block rows, output column): 1 row in slot order, kTileRows
// in grouped order, where consecutive rows of one expert and adapter slot share B; the rows' h
// staged in shared memory, the column's row of B read in j order (kept in registers across a run
// of rows when the rank allows). No sum depends on the batch, the tiling, the order of the visit
// or the run.
#include "kernels/cuda/check.h"
#include "kernels/cuda/moe_lora.cuh"
#include "kernels/cuda/moe_lora_args.cuh"

namespace beam::cuda::moe_lora {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kTileRows = 8;     // block rows a tile in grouped order
constexpr int kCachedRank = 32;  // ranks up to this keep a column's B row in registers

// acc + Σ_u x[u] · f32(w[u]) over 8 elements in order (w: 8 bf16 in a 16-byte word).
__device__ __forceinline__ float fma8(const float* x, const uint4& w, float acc) {
  const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&w);
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const float2 f = __bfloat1622float2(pairs[u]);
    acc = __fmaf_rn(x[2 * u], f.x, acc);
    acc = __fmaf_rn(x[2 * u + 1], f.y, acc);
  }
  return acc;
}

// The 16-byte word at p (16-byte aligned).
__device__ __forceinline__ uint4 load16(const bf16_t* p) {
  return *reinterpret_cast<const uint4*>(p);
}

// acc + Σ_u f32(x[u]) · f32(w[u]) over 8 elements in order (x 16-byte aligned).
__device__ __forceinline__ float fma8(const bf16_t* x, const uint4& w, float acc) {
  const uint4 xv = __ldg(reinterpret_cast<const uint4*>(x));
  const auto* xp = reinterpret_cast<const __nv_bfloat162*>(&xv);
  const auto* wp = reinterpret_cast<const __nv_bfloat162*>(&w);
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const float2 a = __bfloat1622float2(xp[u]), b = __bfloat1622float2(wp[u]);
    acc = __fmaf_rn(a.x, b.x, acc);
    acc = __fmaf_rn(a.y, b.y, acc);
  }
  return acc;
}

// Grid: x = block row, y = chunk of kWarps (part, j) pairs, one a warp. (Tiles of rows sharing A,
// one warp summing several rows, were slower on a prefill chunk: 2.8x reading the x rows from
// global memory, run 310; 1.2x with them in shared memory, run 312.)
__global__ void __launch_bounds__(kThreads) shrink_kernel(const ShrinkArgs p) {
  const Slot v = slot_of(p.rows, blockIdx.x);
  const int q = static_cast<int>(blockIdx.y) * kWarps + static_cast<int>(threadIdx.x) / 32;
  if (!v.has_lora() || q >= p.parts * p.rank) return;
  const int lane = static_cast<int>(threadIdx.x) % 32, part = q / p.rank, j = q % p.rank;
  const int64_t src = p.in_row_of ? p.in_row_of[v.i] : v.t;
  const bf16_t* in = p.in + src * p.k;
  const bf16_t* a =
      pick(p.a, part) + ((static_cast<int64_t>(v.e) * p.num_slots + v.s) * p.rank + j) * p.k;
  float acc = 0.0f;
  if (p.vector_loads) {
#pragma unroll 4
    for (int64_t c = 8 * lane; c < p.k; c += 8 * 32) acc = fma8(in + c, load16(a + c), acc);
  } else {
    for (int64_t c = lane; c < p.k; c += 32)
      acc = __fmaf_rn(__bfloat162float(in[c]), __bfloat162float(a[c]), acc);
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) p.h[v.i * p.parts * p.rank + q] = __fmul_rn(pick(p.scale, part)[v.s], acc);
}

// Σ_j h[j] · f32(b_row[j]) in j order over the rank (b_row: one output column's row of B).
__device__ __forceinline__ float expand(const float* h, const bf16_t* b_row, int rank) {
  float acc = 0.0f;
  if (rank % 8 == 0) {  // 16-byte rows (the stacks are 256-byte aligned)
    for (int j = 0; j < rank; j += 8) acc = fma8(h + j, load16(b_row + j), acc);
  } else {
    for (int j = 0; j < rank; ++j) acc = __fmaf_rn(h[j], __bfloat162float(b_row[j]), acc);
  }
  return acc;
}

// Grid: x = tile of kTile block rows, y = chunk of kThreads of the parts * n (part, column)
// pairs, one a thread. Dynamic shared memory: the tile rows' h (kTile * parts * r floats).
template <bool kAdd, int kTile>
__global__ void __launch_bounds__(kThreads) expand_kernel(const ExpandArgs p) {
  extern __shared__ float h[];
  __shared__ Slot tile[kTile];
  const int tid = static_cast<int>(threadIdx.x), width = p.parts * p.rank;
  if (tid < kTile) {
    const int64_t b = static_cast<int64_t>(blockIdx.x) * kTile + tid;
    tile[tid] = slot_or_none(p.rows, b);
    if (!kAdd && p.has != nullptr && blockIdx.y == 0 && tile[tid].i >= 0)
      p.has[p.out_row_of[tile[tid].i]] = tile[tid].has_lora() ? 1 : 0;
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < kTile; ++r) {
    if (!tile[r].has_lora()) continue;
    for (int c = tid; c < width; c += kThreads) h[r * width + c] = p.h[tile[r].i * p.h_stride + c];
  }
  __syncthreads();
  const int64_t flat = static_cast<int64_t>(blockIdx.y) * kThreads + tid;
  if (flat >= p.parts * p.n) return;
  const int part = flat >= p.n ? 1 : 0;
  const int64_t col = flat - part * p.n;
  const bf16_t* b_part = pick(p.b, part);
  const bool cached = p.rank % 8 == 0 && p.rank <= kCachedRank;
  uint4 w[kCachedRank / 8] = {};
  const bf16_t* loaded = nullptr;
#pragma unroll
  for (int r = 0; r < kTile; ++r) {
    const Slot v = tile[r];
    if (!v.has_lora()) continue;
    const bf16_t* b =
        b_part + ((static_cast<int64_t>(v.e) * p.num_slots + v.s) * p.n + col) * p.rank;
    const float* hr = h + r * width + part * p.rank;
    float d = 0.0f;
    if (cached) {  // the same j order as expand
      if (b != loaded) {
#pragma unroll
        for (int u = 0; u < kCachedRank / 8; ++u)
          if (8 * u < p.rank) w[u] = load16(b + 8 * u);
        loaded = b;
      }
#pragma unroll
      for (int u = 0; u < kCachedRank / 8; ++u)
        if (8 * u < p.rank) d = fma8(hr + 8 * u, w[u], d);
    } else {
      d = expand(hr, b, p.rank);
    }
    if constexpr (kAdd) {
      bf16_t* y = p.y + static_cast<int64_t>(p.out_row_of[v.i]) * p.y_stride + col;
      *y = __float2bfloat16_rn(__fadd_rn(__bfloat162float(*y), d));
    } else {
      const int64_t row = p.has != nullptr ? p.out_row_of[v.i] : v.i;
      p.delta[row * p.parts * p.n + flat] = d;
    }
  }
}

constexpr int kSortWarps = 8;  // experts a sort block: one a warp

// Warp w sorts expert blockIdx.x * kSortWarps + w's grouped rows by the key adapter slot + 1 in
// two sweeps of 32 rows: count the keys, then place each row after the keys below it and the
// earlier rows of its key (__match_any_sync groups a sweep's lanes by key: stable). Dynamic
// shared memory: [kSortWarps, S + 1] counts, then the keys' next places.
__global__ void __launch_bounds__(32 * kSortWarps)
    sort_by_adapter_kernel(const Rows grouped, const int32_t* offsets, int num_experts,
                           int num_slots, int32_t* order) {
  extern __shared__ int32_t next[];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int e = static_cast<int>(blockIdx.x) * kSortWarps + warp;
  if (e >= num_experts) return;  // no block-wide syncs below
  int32_t* at = next + warp * (num_slots + 1);
  for (int k = lane; k <= num_slots; k += 32) at[k] = 0;
  __syncwarp();
  const int first = offsets[e], end = offsets[e + 1];
  // the key of grouped row g (-1 past the expert's rows)
  const auto key_of = [&](int g) {
    if (g >= end) return -1;
    const int32_t s = grouped.slots[grouped.order[g] / grouped.top_k];
    if (s < kNoLoraSlot || s >= num_slots) __trap();
    return s + 1;
  };
  const unsigned below = (1u << lane) - 1u;
  for (int base = first; base < end; base += 32) {
    const int key = key_of(base + lane);
    const unsigned same = __match_any_sync(0xffffffffu, key);
    if (key >= 0 && (same & below) == 0) at[key] += __popc(same);
    __syncwarp();
  }
  if (lane == 0) {
    int run = first;
    for (int k = 0; k <= num_slots; ++k) {
      const int n = at[k];
      at[k] = run;
      run += n;
    }
  }
  __syncwarp();
  for (int base = first; base < end; base += 32) {
    const int key = key_of(base + lane);
    const unsigned same = __match_any_sync(0xffffffffu, key);
    if (key >= 0) order[at[key] + __popc(same & below)] = grouped.order[base + lane];
    __syncwarp();
    if (key >= 0 && (same & below) == 0) at[key] += __popc(same);
    __syncwarp();
  }
}

// Block rows a tile: kTileRows in grouped order, else 1.
int tile_rows(const Rows& rows) {
  return rows.order != nullptr ? kTileRows : 1;
}

template <bool kAdd, int kTile>
void launch_expand_tiles(CudaContext& ctx, const ExpandArgs& p) {
  const int64_t tiles = (p.rows.count + kTile - 1) / kTile;
  const int64_t chunks = (p.parts * p.n + kThreads - 1) / kThreads;
  BEAM_CHECK(chunks <= kMaxGridY && tiles <= INT32_MAX)
      << "moe_lora: expand grid " << tiles << " x " << chunks << " too large";
  const size_t smem = static_cast<size_t>(kTile * p.parts * p.rank) * sizeof(float);
  if (smem > 48 * 1024)
    CUDA_OK(cudaFuncSetAttribute(expand_kernel<kAdd, kTile>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(smem)));
  expand_kernel<kAdd, kTile><<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(chunks)),
                               kThreads, smem, ctx.stream>>>(p);
  CUDA_LAUNCH_OK();
}

template <bool kAdd>
void launch_expand_kernel(CudaContext& ctx, const ExpandArgs& p) {
  if (p.rows.count == 0 || p.rank == 0 || p.n == 0) return;
  if (expand_mma_fits(p)) {
    launch_expand_mma(ctx, p, kAdd);
  } else if (tile_rows(p.rows) == kTileRows) {
    launch_expand_tiles<kAdd, kTileRows>(ctx, p);
  } else {
    launch_expand_tiles<kAdd, 1>(ctx, p);
  }
}

ExpandArgs expand_args(const ExpertLoraStack* const* parts, int num_parts, const Rows& rows,
                       const float* h) {
  ExpandArgs p{};
  p.h = h;
  p.parts = num_parts;
  p.num_slots = static_cast<int>(parts[0]->b.dim(1));
  p.n = parts[0]->b.dim(2);
  p.rank = static_cast<int>(parts[0]->b.dim(3));
  p.h_stride = static_cast<int64_t>(num_parts) * p.rank;
  p.y_stride = p.n;
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
  BEAM_CHECK(num_parts >= 1 && num_parts <= 2) << "moe_lora: " << num_parts << " parts";
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
  if (shrink_mma_fits(p)) {
    launch_shrink_mma(ctx, p);
    return;
  }
  const int64_t chunks = (num_parts * p.rank + kWarps - 1) / kWarps;
  BEAM_CHECK(rows.count <= INT32_MAX && chunks <= kMaxGridY)
      << "moe_lora: shrink grid " << rows.count << " x " << chunks << " too large";
  shrink_kernel<<<dim3(static_cast<unsigned>(rows.count), static_cast<unsigned>(chunks)), kThreads,
                  0, ctx.stream>>>(p);
  CUDA_LAUNCH_OK();
}

void launch_expand(CudaContext& ctx, const float* h, const ExpertLoraStack& gate,
                   const ExpertLoraStack& up, const Rows& rows, float* delta, int32_t* has,
                   const int32_t* row_of) {
  BEAM_CHECK((has == nullptr) == (row_of == nullptr)) << "moe_lora: has needs row_of";
  const ExpertLoraStack* parts[] = {&gate, &up};
  ExpandArgs p = expand_args(parts, 2, rows, h);
  p.delta = delta;
  p.has = has;
  p.out_row_of = row_of;
  launch_expand_kernel<false>(ctx, p);
}

void launch_sort_by_adapter(CudaContext& ctx, const Rows& grouped, const int32_t* offsets,
                            int num_experts, int num_slots, int32_t* order) {
  if (num_experts == 0) return;
  const size_t smem = static_cast<size_t>(kSortWarps) * (num_slots + 1) * sizeof(int32_t);
  BEAM_CHECK(smem <= 48 * 1024) << "moe_lora: " << num_slots << " adapter slots to sort by";
  const auto blocks = static_cast<unsigned>((num_experts + kSortWarps - 1) / kSortWarps);
  sort_by_adapter_kernel<<<blocks, 32 * kSortWarps, smem, ctx.stream>>>(
      grouped, offsets, num_experts, num_slots, order);
  CUDA_LAUNCH_OK();
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
