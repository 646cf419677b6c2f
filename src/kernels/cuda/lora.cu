// CUDA LoRA deltas. Up to 256 tokens (decode batches, the graphs' buckets): one launch for up to
// kMaxLoraOutputs modules that share x (q, k, v and gate; the dense MLP's gate and up), no
// scratch. A cluster of kCluster blocks serves kGroup tokens and a range of the modules' output
// columns (all modules' columns in a row): each block takes a kCluster-th of the input width for
// the shrink (partial h = A_s · x[t] over its slice, every module's r rows), the cluster sums the
// partials through distributed shared memory (rank order), and each block then adds B_s · h to its
// share of the range's columns. Clusters of other column ranges redo the (small) shrink.
// Past 256 tokens (prefill chunks) the modules whose shapes allow it run on tensor cores instead:
// the routed experts' tile kernels (moe_lora_mma.cu) with the tokens in order as one expert, a
// shrink of all of them into ctx.lora's h, then an expand a module.
// Every sum has an order fixed by in, r and the kernel's constants alone, never by the other
// tokens' slots, the column range or the other modules of the launch: within each of the two
// paths a token's result does not depend on the batch around it, and a module's bits are those of
// a call of its own.
#include <algorithm>
#include <array>
#include <cstdio>

#include "core/check.h"
#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/cluster.cuh"
#include "kernels/cuda/lora.h"
#include "kernels/cuda/moe_lora_args.cuh"

namespace beam::cuda {
namespace {

constexpr int kCluster = 8;  // blocks that split one token group's shrink (a portable cluster)
constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kGroup = 8;      // tokens a cluster serves together (they share A and B loads)
// h of a group lives in shared memory: [kGroup, kMaxRows] fp32, the rows of every module of a
// launch (one module of the largest rank, four of a quarter of it).
constexpr int kMaxRows = static_cast<int>(lora_max_rank(Device::kCuda));
constexpr int kInFlight = 4;   // packs of a row each lane loads before it uses them
constexpr int kOutputs = static_cast<int>(kMaxLoraOutputs);

__host__ __device__ int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// One module of a launch: its factors and where its deltas go.
struct LoraModuleArgs {
  const bf16_t* a;     // [S, r, in]
  const bf16_t* b;     // [S, n, r]
  const float* scale;  // [S]
  bf16_t* out;         // [T, out_width], columns col0 .. col0 + n - 1 updated
  int64_t n, out_width, col0;
  int64_t first_col;  // its first column among the launch's columns (the modules' n in a row)
};

struct LoraArgs {
  const bf16_t* x;       // [T, in]
  const int32_t* slots;  // [T]
  LoraModuleArgs m[kOutputs];
  int32_t modules;
  int64_t T, in, r, columns;  // columns: Σ n over the modules
  int32_t S;
  int64_t cluster_cols;  // columns per cluster (the last cluster's range may be shorter)
};

// The slots of a token group: each distinct slot once, with the mask of its tokens (bit g: token
// t0 + g); tokens without a slot (or past T) are in no mask.
struct GroupSlots {
  int slot[kGroup];
  unsigned mask[kGroup];
  int count;
  unsigned adds;  // the union of the masks
};

// Thread 0 reads the group's slots (a slot outside [-1, S) traps) into `out`.
__device__ void load_group_slots(const LoraArgs& p, int64_t t0, GroupSlots& out) {
  if (threadIdx.x != 0) return;
  int count = 0;
  unsigned adds = 0;
  for (int g = 0; g < kGroup && t0 + g < p.T; ++g) {
    const int32_t s = p.slots[t0 + g];
    if (s < kNoLoraSlot || s >= p.S) {
      printf("lora_add: token %lld has slot %d of %d\n", static_cast<long long>(t0 + g), s, p.S);
      __trap();
    }
    if (s == kNoLoraSlot) continue;
    int q = 0;
    while (q < count && out.slot[q] != s) ++q;
    if (q == count) {
      out.slot[count] = s;
      out.mask[count++] = 0;
    }
    out.mask[q] |= 1u << g;
    adds |= 1u << g;
  }
  out.count = count;
  out.adds = adds;
}

// partial[g][row] = Σ over this rank's slice of the input of x[t0 + g, i] · A_s[j, i] for each
// module's rows j (row = module · r + j; s the token's slot; 0 for tokens without one). Warps
// take rows; each lane sums the packs lane, lane + 32, … of the slice in that order (each pack's
// N products in order), then the warp sums its lanes (xor tree).
template <int N>
__device__ void shrink_slice(const LoraArgs& p, const GroupSlots& gs, int64_t t0, uint32_t rank,
                             float (*partial)[kMaxRows]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t packs = p.in / N, per_rank = ceil_div(packs, kCluster);
  const int64_t begin = rank * per_rank, end = min(packs, begin + per_rank);
  for (int64_t row = warp; row < p.modules * p.r; row += kWarps) {
    const LoraModuleArgs& m = p.m[row / p.r];
    const int64_t j = row % p.r;
    float acc[kGroup] = {};
    for (int q = 0; q < gs.count; ++q) {
      const bf16_t* a_row = m.a + (gs.slot[q] * p.r + j) * p.in;
      for (int64_t u0 = begin + lane; u0 < end; u0 += 32 * kInFlight) {
        Pack<N> av[kInFlight];
#pragma unroll
        for (int k = 0; k < kInFlight; ++k)
          if (u0 + 32 * k < end) av[k] = load_bf16<N>(a_row + (u0 + 32 * k) * N);
#pragma unroll
        for (int g = 0; g < kGroup; ++g) {
          if ((gs.mask[q] >> g & 1u) == 0) continue;
          const bf16_t* x_row = p.x + (t0 + g) * p.in;
          Pack<N> xv[kInFlight];
#pragma unroll
          for (int k = 0; k < kInFlight; ++k)
            if (u0 + 32 * k < end) xv[k] = load_bf16<N>(x_row + (u0 + 32 * k) * N);
#pragma unroll
          for (int k = 0; k < kInFlight; ++k) {
            if (u0 + 32 * k >= end) continue;
#pragma unroll
            for (int e = 0; e < N; ++e) acc[g] = fmaf(xv[k].v[e], av[k].v[e], acc[g]);
          }
        }
      }
    }
#pragma unroll
    for (int g = 0; g < kGroup; ++g) acc[g] = warp_sum(acc[g]);
    if (lane == 0) {
#pragma unroll
      for (int g = 0; g < kGroup; ++g) partial[g][row] = acc[g];
    }
  }
}

// For this block's columns of the cluster's range (one a thread; column c of module m is its
// output column m.col0 + c - m.first_col): out[t0 + g, ·] = bf16(f32(out) + Σ_j B_s[c, j] ·
// h[g][m's rows][j]) (j ascending, fused multiply-adds), B's row loaded kInFlight packs at a time.
template <int N>
__device__ void expand_columns(const LoraArgs& p, const GroupSlots& gs, int64_t t0, uint32_t rank,
                               int64_t c_begin, int64_t c_end, const float (*h)[kMaxRows]) {
  for (int64_t col = c_begin + rank * kThreads + threadIdx.x; col < c_end;
       col += kCluster * kThreads) {
    int mi = 0;
    while (mi + 1 < p.modules && col >= p.m[mi + 1].first_col) ++mi;
    const LoraModuleArgs& m = p.m[mi];
    const int64_t c = col - m.first_col, h0 = mi * p.r;
    float acc[kGroup] = {};
    for (int q = 0; q < gs.count; ++q) {
      const bf16_t* b_row = m.b + (gs.slot[q] * m.n + c) * p.r;
      for (int64_t k0 = 0; k0 < p.r; k0 += N * kInFlight) {
        Pack<N> bv[kInFlight];
#pragma unroll
        for (int k = 0; k < kInFlight; ++k)
          if (k0 + N * k < p.r) bv[k] = load_bf16<N>(b_row + k0 + N * k);
#pragma unroll
        for (int g = 0; g < kGroup; ++g) {
          if ((gs.mask[q] >> g & 1u) == 0) continue;
#pragma unroll
          for (int k = 0; k < kInFlight; ++k) {
            if (k0 + N * k >= p.r) continue;
#pragma unroll
            for (int e = 0; e < N; ++e)
              acc[g] = fmaf(bv[k].v[e], h[g][h0 + k0 + N * k + e], acc[g]);
          }
        }
      }
    }
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      if ((gs.adds >> g & 1u) == 0) continue;
      bf16_t* o = m.out + (t0 + g) * m.out_width + m.col0 + c;
      *o = to_bf16_rn(to_f32(*o) + acc[g]);
    }
  }
}

// Grid (kCluster · column ranges, token groups), clusters of kCluster blocks along x. NX: the
// pack width of x and A rows (8 when in is a multiple of 8 and all are 16-byte aligned, else 1);
// NB: that of B rows (8 when r is).
template <int NX, int NB>
__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kThreads)
    lora_kernel(LoraArgs p) {
  __shared__ GroupSlots group;
  __shared__ __align__(16) float partial[kGroup][kMaxRows];
  __shared__ __align__(16) float h[kGroup][kMaxRows];
  const uint32_t rank = cluster::rank();
  const int64_t t0 = int64_t{blockIdx.y} * kGroup;
  load_group_slots(p, t0, group);
  __syncthreads();
  if (group.count == 0) return;  // the same in every block of the cluster: none waits below

  shrink_slice<NX>(p, group, t0, rank, partial);
  cluster::sync();  // every rank's partials are written
  const int rows = static_cast<int>(p.modules * p.r);
  for (int q = 0; q < group.count; ++q) {
    for (int i = threadIdx.x; i < kGroup * rows; i += kThreads) {
      const int g = i / rows, row = i % rows;
      if ((group.mask[q] >> g & 1u) == 0) continue;
      float sum = 0.0f;
      for (uint32_t k = 0; k < kCluster; ++k)
        sum += __uint_as_float(cluster::load_u32(cluster::map(&partial[g][row], k)));
      h[g][row] = p.m[row / p.r].scale[group.slot[q]] * sum;
    }
  }
  cluster::sync();  // h is complete in this block; no rank leaves while others read its partials

  const int64_t c_begin = int64_t{blockIdx.x / kCluster} * p.cluster_cols;
  const int64_t c_end = min(p.columns, c_begin + p.cluster_cols);
  expand_columns<NB>(p, group, t0, rank, c_begin, c_end, h);
}

// Column ranges per token group: about one block per SM over all groups (decode batches spread
// B's rows over the GPU), while each block keeps at least a column per thread.
int64_t column_ranges(const CudaContext& ctx, int64_t token_groups, int64_t columns) {
  const int64_t want = ceil_div(ctx.props.multiProcessorCount, kCluster * token_groups);
  return std::clamp<int64_t>(want, 1, ceil_div(columns, int64_t{kCluster} * kThreads));
}

// One launch for outputs (1..kOutputs of them, modules · r <= kMaxRows).
void launch(CudaContext& ctx, const TensorView& x, std::span<const LoraOutput> outputs,
            const TensorView& slots) {
  const LoraStack& first = outputs[0].stack;
  LoraArgs p{};
  p.x = static_cast<const bf16_t*>(x.data);
  p.slots = static_cast<const int32_t*>(slots.data);
  p.modules = static_cast<int32_t>(outputs.size());
  p.T = x.dim(0);
  p.in = x.dim(1);
  p.r = first.a.dim(1);
  p.S = static_cast<int32_t>(first.a.dim(0));
  bool wide_x = p.in % 8 == 0 && all_aligned16(p.x), wide_b = p.r % 8 == 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const LoraOutput& o = outputs[i];
    LoraModuleArgs& m = p.m[i];
    m.a = static_cast<const bf16_t*>(o.stack.a.data);
    m.b = static_cast<const bf16_t*>(o.stack.b.data);
    m.scale = static_cast<const float*>(o.stack.scale.data);
    m.out = static_cast<bf16_t*>(o.out.data);
    m.n = o.stack.b.dim(1);
    m.out_width = o.out.dim(1);
    m.col0 = o.col0;
    m.first_col = p.columns;
    p.columns += m.n;
    wide_x = wide_x && all_aligned16(m.a);
    wide_b = wide_b && all_aligned16(m.b);
  }
  if (p.columns == 0) return;
  const int64_t token_groups = ceil_div(p.T, kGroup);
  BEAM_CHECK(token_groups <= 65535) << "lora_add: " << p.T << " tokens in one call";
  const int64_t ranges = column_ranges(ctx, token_groups, p.columns);
  BEAM_CHECK(ranges * kCluster <= 0x7fffffff) << "lora_add: " << p.columns << " columns";
  p.cluster_cols = ceil_div(p.columns, ranges);

  const dim3 grid(static_cast<unsigned>(ranges * kCluster), static_cast<unsigned>(token_groups));
  auto* kernel = wide_x ? (wide_b ? lora_kernel<8, 8> : lora_kernel<8, 1>)
                        : (wide_b ? lora_kernel<1, 8> : lora_kernel<1, 1>);
  kernel<<<grid, kThreads, 0, ctx.stream>>>(p);
  CUDA_LAUNCH_OK();
}

// ---- the tensor-core path (more than 256 tokens) ----------------------------------------------

// Past the decode graphs' largest bucket: prefill chunks, never captured (ctx.lora grows on the
// stream; the engine's warm-up reserves it for its largest step).
constexpr int64_t kTilesMinTokens = 257;

// The tokens in order, as the routed slots of one expert (top-1).
moe_lora::Rows token_rows(const TensorView& slots, int64_t T) {
  return moe_lora::Rows{
      .slots = slots.as<int32_t>(), .ids = nullptr, .order = nullptr, .count = T, .top_k = 1};
}

// The expand of output o's module; h: its first column of h, whose rows are h_stride floats.
moe_lora::ExpandArgs module_expand(const LoraOutput& o, const moe_lora::Rows& rows, const float* h,
                                   int64_t h_stride) {
  moe_lora::ExpandArgs e{};
  e.h = h;
  e.b[0] = static_cast<const bf16_t*>(o.stack.b.data);
  e.parts = 1;
  e.num_slots = static_cast<int>(o.stack.b.dim(0));
  e.rank = static_cast<int>(o.stack.b.dim(2));
  e.n = o.stack.b.dim(1);
  e.h_stride = h_stride;
  e.y_stride = o.out.dim(1);
  e.rows = rows;
  e.y = static_cast<bf16_t*>(o.out.data) + o.col0;
  return e;
}

// Whether output o's module takes the tensor-core path: more than 256 tokens, 16-byte words of x
// and A (the shrink), and an expand the tile kernel takes (its h 16-byte aligned: r % 4 == 0).
bool tiles_take(const TensorView& x, const LoraOutput& o, bool invariant) {
  return !invariant && x.dim(0) >= kTilesMinTokens && x.dim(1) % 8 == 0 &&
         all_aligned16(x.data, o.stack.a.data) &&
         moe_lora::expand_mma_fits(module_expand(o, {}, nullptr, 0));
}

// The modules of `outputs` (all taken by tiles_take) on tensor cores: one shrink into h [T,
// modules · r], then an expand per module.
void launch_tiles(CudaContext& ctx, const TensorView& x, std::span<const LoraOutput> outputs,
                  const TensorView& slots) {
  const int64_t T = x.dim(0), r = outputs[0].stack.a.dim(1);
  const auto modules = static_cast<int64_t>(outputs.size());
  const moe_lora::Rows rows = token_rows(slots, T);
  auto* h = reinterpret_cast<float*>(ctx.lora.reserve(
      static_cast<size_t>(T * modules * r) * sizeof(float), ctx.stream, "lora_add (CUDA)"));
  moe_lora::ShrinkArgs s{};
  s.in = static_cast<const bf16_t*>(x.data);
  s.k = x.dim(1);
  s.parts = static_cast<int>(modules);
  s.num_slots = static_cast<int>(outputs[0].stack.a.dim(0));
  s.rank = static_cast<int>(r);
  s.rows = rows;
  s.h = h;
  s.vector_loads = true;  // tiles_take
  for (int64_t m = 0; m < modules; ++m) {
    s.a[m] = static_cast<const bf16_t*>(outputs[m].stack.a.data);
    s.scale[m] = outputs[m].stack.scale.as<float>();
  }
  moe_lora::launch_shrink_mma(ctx, s);
  for (int64_t m = 0; m < modules; ++m)
    moe_lora::launch_expand_mma(ctx, module_expand(outputs[m], rows, h + m * r, modules * r),
                                /*add=*/true);
}

}  // namespace

void lora_add(CudaContext& ctx, const TensorView& x, std::span<const LoraOutput> outputs,
              const TensorView& slots, bool invariant) {
  const int64_t r = outputs[0].stack.a.dim(1);
  BEAM_CHECK(r <= kMaxRows) << "lora_add: rank " << r << " over the CUDA kernel's " << kMaxRows;
  // Each output on the path its own shapes pick (so its bits are those of a call of its own).
  std::array<LoraOutput, kMaxLoraOutputs> tiled, clustered;
  size_t num_tiled = 0, num_clustered = 0;
  for (const LoraOutput& o : outputs) {
    if (tiles_take(x, o, invariant)) {
      tiled[num_tiled++] = o;
    } else {
      clustered[num_clustered++] = o;
    }
  }
  if (num_tiled > 0) launch_tiles(ctx, x, std::span(tiled.data(), num_tiled), slots);
  // As many modules a launch as their rows fit in shared memory.
  const auto per_launch = static_cast<size_t>(std::min<int64_t>(kOutputs, kMaxRows / r));
  const std::span<const LoraOutput> rest(clustered.data(), num_clustered);
  for (size_t i = 0; i < rest.size(); i += per_launch)
    launch(ctx, x, rest.subspan(i, std::min(per_launch, rest.size() - i)), slots);
}

}  // namespace beam::cuda
