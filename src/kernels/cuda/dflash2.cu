// CUDA DFlash2 drafter ops (kernels/api/dflash2.h): the two-tap convolution and the context store
// (exact: the CPU's operations) and the selector (top-k, then the greedy walk, exact); the block
// attention is dflash2_attention.cu's.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/dflash2.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/sampling_math.cuh"

namespace beam::cuda {
namespace {

__host__ __device__ constexpr int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

constexpr unsigned kFullMask = 0xffffffffu;

// ---- Convolution --------------------------------------------------------------------------------

constexpr int kConvThreads = 256;
constexpr int kConvBlocksPerSm = 8;

// One item: channels [c0, c0 + N) of one block's rows, walked from the last row so that x_t and
// x_{t-1} are read before y_t is written (out may alias x; no other thread touches these
// channels). fp32 operations as the CPU's, unfused. N == 8 needs group_size % 8 == 0 (one d value
// per pack).
template <int N>
__global__ void conv_kernel(const bf16_t* base, const bf16_t* d, const bf16_t* x, bf16_t* out,
                            int64_t num_items, int64_t H, int64_t group_size, int64_t block_size,
                            int64_t side) {
  const int64_t packs = H / N, groups = H / group_size;
  for (int64_t item = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; item < num_items;
       item += int64_t{gridDim.x} * blockDim.x) {
    const int64_t first = item / packs * block_size, c0 = item % packs * N;
    const int64_t gi = c0 / group_size;
    const Pack<N> base0 = load_bf16<N>(base + side * 2 * H + c0);
    const Pack<N> base1 = load_bf16<N>(base + (side * 2 + 1) * H + c0);
    Pack<N> cur = load_bf16<N>(x + (first + block_size - 1) * H + c0);
    for (int64_t t = block_size - 1; t >= 0; --t) {
      Pack<N> prev{};
      if (t > 0) prev = load_bf16<N>(x + (first + t - 1) * H + c0);
      const bf16_t* dt = d + (first + t) * 4 * groups + side * 2 * groups;  // [side, tap, group]
      const float d0 = to_f32(dt[gi]), d1 = to_f32(dt[groups + gi]);
      Pack<N> y;
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const float k0 = __fadd_rn(base0.v[i], d0), k1 = __fadd_rn(base1.v[i], d1);
        float sum = __fmul_rn(k0, cur.v[i]);
        if (t > 0) sum = __fadd_rn(sum, __fmul_rn(k1, prev.v[i]));
        y.v[i] = sum;
      }
      store_bf16<N>(out + (first + t) * H + c0, y);
      cur = prev;
    }
  }
}

// ---- Context store ------------------------------------------------------------------------------

// One CTA per token row t: keys[slots[t]] = k[t], values[slots[t]] = v[t] in units of Unit (uint4
// or bf16), and slot_positions[slots[t]] = positions[t] when positions is given. A slot outside
// [0, num_slots) is a caller bug: the kernel traps.
template <typename Unit>
__global__ void store_context_kernel(const Unit* k, const Unit* v, const int64_t* slots,
                                     const int64_t* positions, Unit* keys, Unit* values,
                                     int64_t* slot_positions, int64_t num_slots,
                                     int64_t units_per_row) {
  const int64_t t = blockIdx.x, slot = slots[t];
  if (slot < 0 || slot >= num_slots) {
    if (threadIdx.x == 0)
      printf("dflash2_store_context: slot %lld at row %lld outside the pool of %lld slots\n",
             static_cast<long long>(slot), static_cast<long long>(t),
             static_cast<long long>(num_slots));
    __trap();
  }
  for (int64_t u = threadIdx.x; u < units_per_row; u += blockDim.x) {
    keys[slot * units_per_row + u] = k[t * units_per_row + u];
    values[slot * units_per_row + u] = v[t * units_per_row + u];
  }
  if (positions != nullptr && threadIdx.x == 0) slot_positions[slot] = positions[t];
}

// ---- Selector -----------------------------------------------------------------------------------

constexpr int kTopThreads = 512;
constexpr int kTopCapacity = 2048;  // candidate keys a row's buffer holds (a power of two)
constexpr int kMaxTopK = 64;
// A row's top-k runs over slices of the vocabulary merged after: at most kMaxSliceKeys logits a
// slice, which its CTA holds in registers (16 a thread), and for few rows more slices, of at
// least kMinSliceKeys logits, to fill the GPU.
constexpr int64_t kMinSliceKeys = 4096;
constexpr int64_t kMaxSliceKeys = 8192;
constexpr int kWalkThreads = 256;
constexpr int64_t kMaxPairBytes = int64_t{64} << 20;  // the pair walk's table [R, K, K] f32 at most

using sampling_detail::id_of_key;
using sampling_detail::order_bits;
using sampling_detail::rank_key;

// The warp's 32 values sorted descending across its lanes: lane i returns the (i + 1)-th largest.
__device__ __forceinline__ unsigned long long warp_sort_descending(unsigned long long v) {
  const int lane = static_cast<int>(threadIdx.x % 32);
#pragma unroll
  for (int size = 2; size <= 32; size <<= 1)
#pragma unroll
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      const unsigned long long other = __shfl_xor_sync(kFullMask, v, stride);
      const bool descending = (lane & size) == 0, lower = (lane & stride) == 0;  // size 32: all
      v = lower == descending ? max(v, other) : min(v, other);
    }
  return v;
}

// A thread's elements of a slice row[0, n) (n <= kMaxSliceKeys, ids id0 + i) as order_bits,
// read once into registers: group g is element group threadIdx.x + g * kTopThreads of N values
// (float4s for N == 4: n % 4 == 0, row 16-byte aligned).
template <int N>
struct SliceValues {
  static constexpr int kGroups = static_cast<int>(kMaxSliceKeys) / (kTopThreads * N);
  uint32_t bits[kGroups * N];
  int groups = 0;  // the groups this thread holds
  int id0 = 0;

  __device__ SliceValues(const float* row, int64_t n, int first_id) : id0(first_id) {
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      const int64_t gi = threadIdx.x + int64_t{g} * kTopThreads;
      if (gi >= n / N) break;
      groups = g + 1;
      if constexpr (N == 4) {
        const float4 f = reinterpret_cast<const float4*>(row)[gi];
        bits[4 * g] = order_bits(f.x);
        bits[4 * g + 1] = order_bits(f.y);
        bits[4 * g + 2] = order_bits(f.z);
        bits[4 * g + 3] = order_bits(f.w);
      } else {
        bits[g] = order_bits(row[gi]);
      }
    }
  }
  // visit(bits, id) for each element, in increasing id order.
  template <typename Visit>
  __device__ __forceinline__ void for_each(Visit&& visit) const {
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      if (g >= groups) break;
#pragma unroll
      for (int i = 0; i < N; ++i)
        visit(bits[g * N + i], id0 + N * static_cast<int>(threadIdx.x + g * kTopThreads) + i);
    }
  }
};

// The largest key of the block's values below `bound` (0: none); every thread gets it.
template <int N>
__device__ unsigned long long block_max_below(const SliceValues<N>& values,
                                              unsigned long long bound,
                                              unsigned long long* partial) {
  unsigned long long best = 0;
  values.for_each([&](uint32_t bits, int id) {
    const unsigned long long key = rank_key(bits, id);
    if (key < bound && key > best) best = key;
  });
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) best = max(best, __shfl_xor_sync(kFullMask, best, off));
  __syncthreads();  // partial[] may still be read
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = best;
  __syncthreads();
  for (int w = 0; w < static_cast<int>(blockDim.x) / 32; ++w) best = max(best, partial[w]);
  return best;
}

// The K largest keys of row[0, n) (n <= kMaxSliceKeys, ids id0 + i; larger u first, the lower id
// on ties: rank keys are unique): emit(i, key) for i < K, the i-th largest (key 0 past the n-th).
// Every thread of the block calls it over the block's shared `keys`; the row is read once, into
// registers. Each warp's m-th largest thread maximum (m = ceil(K / warps)) has m keys at or
// above it, so the least of them bounds the K-th largest key from below: the keys at or above it
// are gathered and each one's rank among them counted. Slices with more such keys than the
// buffer holds (long runs of equal values) take K sweeps instead, each finding the largest key
// below the previous one.
template <int N, typename Emit>
__device__ void block_top_k(const float* row, int64_t n, int id0, int K,
                            unsigned long long* keys, int* count, Emit&& emit) {
  const int warps = static_cast<int>(blockDim.x) / 32, m = (K + warps - 1) / warps;
  // The thread's largest key, compared on 32-bit value bits (ids come in increasing order, so
  // the first of equal values is the larger key).
  const SliceValues<N> values(row, n, id0);
  uint32_t best_bits = 0;
  int best_id = -1;
  values.for_each([&](uint32_t bits, int id) {
    if (best_id < 0 || bits > best_bits) {
      best_bits = bits;
      best_id = id;
    }
  });
  unsigned long long best = best_id < 0 ? 0ull : rank_key(best_bits, best_id);
  best = warp_sort_descending(best);
  if (static_cast<int>(threadIdx.x % 32) == m - 1) keys[threadIdx.x / 32] = best;
  if (threadIdx.x == 0) *count = 0;
  __syncthreads();
  unsigned long long threshold = ~0ull;
  for (int w = 0; w < warps; ++w) threshold = min(threshold, keys[w]);
  __syncthreads();  // every thread read the bound before the buffer is reused
  // key >= threshold on value bits first: larger bits, or equal bits and an id no larger.
  const auto threshold_bits = static_cast<uint32_t>(threshold >> 32);
  const int threshold_id = threshold == 0 ? INT_MAX : id_of_key(threshold);
  values.for_each([&](uint32_t bits, int id) {
    if (bits < threshold_bits || (bits == threshold_bits && id > threshold_id)) return;
    const int at = atomicAdd(count, 1);
    if (at < kTopCapacity) keys[at] = rank_key(bits, id);
  });
  __syncthreads();
  const int found = *count;
  if (found <= kTopCapacity) {
    for (int i = threadIdx.x; i < found; i += blockDim.x) {
      const unsigned long long key = keys[i];
      int rank = 0;
      for (int j = 0; j < found; ++j) rank += keys[j] > key;
      if (rank < K) emit(rank, key);
    }
    for (int i = found + threadIdx.x; i < K; i += blockDim.x) emit(i, 0ull);
    return;
  }
  unsigned long long bound = ~0ull;
  for (int i = 0; i < K; ++i) {
    bound = block_max_below<N>(values, bound, keys);
    if (threadIdx.x == 0) emit(i, bound);
  }
}

// CTA (c, r): the K largest keys of row r's slice c, u[r, c * slice, min(V, (c + 1) * slice)):
// their ids into candidates[r] when the row is one slice, else the keys into partial[r, c, 0 ..
// K) (0 past the slice's keys) for merge_top_k_kernel.
template <int N>
__global__ void __launch_bounds__(kTopThreads)
    slice_top_k_kernel(const float* u, int64_t V, int64_t slice, int K, int32_t* candidates,
                       unsigned long long* partial) {
  __shared__ unsigned long long keys[kTopCapacity];
  __shared__ int count;
  const int64_t begin = int64_t{blockIdx.x} * slice;
  const float* row = u + int64_t{blockIdx.y} * V + begin;
  const int64_t n = slice < V - begin ? slice : V - begin;
  if (gridDim.x == 1) {
    int32_t* out = candidates + int64_t{blockIdx.y} * K;
    block_top_k<N>(row, n, 0, K, keys, &count,
                   [out](int i, unsigned long long key) { out[i] = id_of_key(key); });
    return;
  }
  unsigned long long* out = partial + (int64_t{blockIdx.y} * gridDim.x + blockIdx.x) * K;
  block_top_k<N>(row, n, static_cast<int>(begin), K, keys, &count,
                 [out](int i, unsigned long long key) { out[i] = key; });
}

// One CTA per row: candidates[r] = the ids of the K largest of its slices' keys partial[r, 0 ..
// slices * K) (slices * K <= kTopCapacity; each slice's keys largest first, 0 past its last).
// The K-th largest of the slices' maxima has K keys at or above it: only those keys are ranked,
// each by counting the larger ones among them.
__global__ void __launch_bounds__(kTopThreads)
    merge_top_k_kernel(const unsigned long long* partial, int slices, int K, int32_t* candidates) {
  __shared__ unsigned long long keys[kTopCapacity], kept[kTopCapacity];
  __shared__ unsigned long long bound;
  __shared__ int count;
  const int n = slices * K;
  const unsigned long long* in = partial + int64_t{blockIdx.x} * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) keys[i] = in[i];
  if (threadIdx.x == 0) {
    bound = 1;  // every real key (0 is padding)
    count = 0;
  }
  __syncthreads();
  if (slices > K) {
    for (int c = threadIdx.x; c < slices; c += blockDim.x) {
      const unsigned long long top = keys[c * K];
      int rank = 0;
      for (int d = 0; d < slices; ++d) rank += keys[d * K] > top;
      if (rank == K - 1) bound = top;
    }
    __syncthreads();
  }
  const unsigned long long b = bound;
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    if (keys[i] >= b) kept[atomicAdd(&count, 1)] = keys[i];
  __syncthreads();
  const int m = count;
  for (int i = threadIdx.x; i < m; i += blockDim.x) {
    const unsigned long long key = kept[i];
    int rank = 0;
    for (int j = 0; j < m; ++j) rank += kept[j] > key;
    if (rank < K) candidates[int64_t{blockIdx.x} * K + rank] = id_of_key(key);
  }
}

// One CTA per block b: the greedy walk over its J rows (docs/dflash2.md step 6), each gate and
// pair sum with the CPU's fp32 operations in its order (one thread per candidate sums over the
// rank in ascending order). N == 8 reads successor rows in packs (rank % 8 == 0, aligned).
template <int N>
__global__ void __launch_bounds__(kWalkThreads)
    walk_kernel(const float* u, const bf16_t* hp, const bf16_t* predecessor,
                const bf16_t* successor, const int32_t* anchors, const int32_t* candidates,
                float* scores, int32_t* drafts, int64_t V, int rank, int K, int J) {
  extern __shared__ float gate[];  // [rank]
  __shared__ float row_scores[kMaxTopK];
  __shared__ int32_t row_candidates[kMaxTopK];
  __shared__ int32_t next;
  const int b = static_cast<int>(blockIdx.x);
  int32_t prev = anchors[b];
  for (int j = 0; j < J; ++j) {
    const int64_t r = int64_t{b} * J + j;
    if (prev < 0 || prev >= V) {
      if (threadIdx.x == 0)
        printf("dflash2_select: anchor %d of block %d outside the vocabulary of %lld\n", prev, b,
               static_cast<long long>(V));
      __trap();
    }
    for (int k = threadIdx.x; k < rank; k += blockDim.x)
      gate[k] = round_bf16(
          __fmul_rn(to_f32(predecessor[int64_t{prev} * rank + k]), to_f32(hp[r * rank + k])));
    __syncthreads();
    if (static_cast<int>(threadIdx.x) < K) {
      const int32_t cand = candidates[r * K + threadIdx.x];
      const bf16_t* row = successor + int64_t{cand} * rank;
      float pair = 0.0f;
#pragma unroll 4  // four packs' loads in flight ahead of the ordered sum
      for (int k0 = 0; k0 < rank; k0 += N) {
        const Pack<N> s = load_bf16<N>(row + k0);
#pragma unroll
        for (int i = 0; i < N; ++i) pair = __fadd_rn(pair, __fmul_rn(gate[k0 + i], s.v[i]));
      }
      const float score = __fadd_rn(u[r * V + cand], pair);
      scores[r * K + threadIdx.x] = score;
      row_scores[threadIdx.x] = score;
      row_candidates[threadIdx.x] = cand;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int best = 0;
      for (int i = 1; i < K; ++i)
        if (row_scores[i] > row_scores[best]) best = i;  // the first on ties
      drafts[r] = row_candidates[best];
      next = row_candidates[best];
    }
    __syncthreads();
    prev = next;
  }
}

// The pair kernel's dynamic shared memory for K candidates and `rank`: the gates of every
// possible previous draft [K, rank] f32, the row's K successor rows and the previous drafts'
// predecessor rows [K, stride] bf16 each (rows padded by 16 bytes: the threads reading
// different rows meet in different banks).
struct PairStage {
  int stride;
  size_t successors, predecessors, bytes;
  __host__ __device__ PairStage(int K, int rank) {
    stride = rank + 8;
    successors = static_cast<size_t>(K) * rank * 4;
    predecessors = successors + static_cast<size_t>(K) * stride * 2;
    bytes = predecessors + static_cast<size_t>(K) * stride * 2;
  }
};

// The walk's scores for every previous draft at once, CTA (j, b) for draft row r = b * J + j: the
// previous draft is the anchor (j = 0) or one of row r - 1's K candidates p; for each
// (p, candidate c) pair, pairs[r, p, c] = u[r, cand_c] + Σ_k fp32(gate_p[k] * successor[cand_c,
// k]) with gate_p = bf16(f32(predecessor[prev_p]) * f32(hp[r])), the walk's own operations in its
// order, so walk_pick_kernel's choices are the sequential walk's bit for bit. Needs rank % 8 == 0
// and 16-byte aligned tables.
__global__ void __launch_bounds__(kWalkThreads)
    pair_scores_kernel(const float* u, const bf16_t* hp, const bf16_t* predecessor,
                       const bf16_t* successor, const int32_t* anchors,
                       const int32_t* candidates, float* pairs, int64_t V, int rank, int K,
                       int J) {
  extern __shared__ __align__(16) char stage[];
  const PairStage at(K, rank);
  auto* gates = reinterpret_cast<float*>(stage);
  auto* rows = reinterpret_cast<bf16_t*>(stage + at.successors);
  auto* preds = reinterpret_cast<bf16_t*>(stage + at.predecessors);
  const int j = static_cast<int>(blockIdx.x), b = static_cast<int>(blockIdx.y);
  const int64_t r = int64_t{b} * J + j;
  const int32_t* cands = candidates + r * K;
  // The possible previous drafts: the anchor, or row r - 1's candidates.
  const int P = j == 0 ? 1 : K;
  const int32_t* prevs = j == 0 ? anchors + b : candidates + (r - 1) * K;
  if (j == 0 && (prevs[0] < 0 || prevs[0] >= V)) {  // before any thread reads its row
    if (threadIdx.x == 0)
      printf("dflash2_select: anchor %d of block %d outside the vocabulary of %lld\n", prevs[0],
             b, static_cast<long long>(V));
    __trap();
  }
  const int packs = rank / 8;
  for (int i = threadIdx.x; i < K * packs; i += blockDim.x) {
    const int c = i / packs, p = i % packs;
    cp_async16(rows + c * at.stride + p * 8, successor + int64_t{cands[c]} * rank + p * 8, 16);
  }
  for (int i = threadIdx.x; i < P * packs; i += blockDim.x) {
    const int q = i / packs, p = i % packs;
    cp_async16(preds + q * at.stride + p * 8, predecessor + int64_t{prevs[q]} * rank + p * 8, 16);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  for (int i = threadIdx.x; i < P * rank; i += blockDim.x) {
    const int q = i / rank, k = i % rank;
    gates[i] = round_bf16(__fmul_rn(to_f32(preds[q * at.stride + k]), to_f32(hp[r * rank + k])));
  }
  __syncthreads();
  for (int t = threadIdx.x; t < P * K; t += blockDim.x) {
    const int p = t / K, c = t % K;
    const float logit = u[r * V + cands[c]];
    const float* gate = gates + p * rank;
    const bf16_t* row = rows + c * at.stride;
    float pair = 0.0f;
#pragma unroll 4  // four packs' shared loads in flight ahead of the ordered sum
    for (int k0 = 0; k0 < rank; k0 += 8) {
      const Pack<8> sv = load_bf16<8>(row + k0);
#pragma unroll
      for (int i = 0; i < 8; ++i) pair = __fadd_rn(pair, __fmul_rn(gate[k0 + i], sv.v[i]));
    }
    pairs[(r * K + p) * K + c] = __fadd_rn(logit, pair);
  }
}

// One warp per block b: the walk over pair_scores_kernel's table, from the anchor's row: row j's
// draft is its best candidate given the previous draft (the first on ties), its scores that
// previous draft's row of the table.
__global__ void __launch_bounds__(32)
    walk_pick_kernel(const float* pairs, const int32_t* candidates, float* scores,
                     int32_t* drafts, int K, int J) {
  const int lane = static_cast<int>(threadIdx.x), b = static_cast<int>(blockIdx.x);
  int prev = 0;  // the previous draft's index among the previous row's candidates
  for (int j = 0; j < J; ++j) {
    const int64_t r = int64_t{b} * J + j;
    const float* row = pairs + (r * K + prev) * K;
    const float lo = lane < K ? row[lane] : 0.0f, hi = lane + 32 < K ? row[lane + 32] : 0.0f;
    if (lane < K) scores[r * K + lane] = lo;
    if (lane + 32 < K) scores[r * K + lane + 32] = hi;
    int best = 0;
    float best_score = __shfl_sync(kFullMask, lo, 0);
    for (int i = 1; i < K; ++i) {  // every lane walks the same scores, in order
      const float score = __shfl_sync(kFullMask, i < 32 ? lo : hi, i % 32);
      if (score > best_score) {  // the first on ties
        best = i;
        best_score = score;
      }
    }
    if (lane == 0) drafts[r] = candidates[r * K + best];
    prev = best;
  }
}

// Slices of each row for the top-k (see kMaxSliceKeys): enough for slices of kMaxSliceKeys, more
// when the rows are too few to fill the GPU (about two CTAs an SM in all, slices of at least
// kMinSliceKeys), at most kTopCapacity / K (the merge's buffer).
int64_t top_k_slices(const CudaContext& ctx, int64_t R, int64_t V, int64_t K) {
  const int64_t for_registers = ceil_div(V, kMaxSliceKeys);
  const int64_t for_sms =
      std::min(ceil_div(int64_t{2} * ctx.props.multiProcessorCount, R), V / kMinSliceKeys);
  return std::clamp<int64_t>(std::max(for_registers, for_sms), 1, kTopCapacity / K);
}

unsigned grid_for(const CudaContext& ctx, int64_t num_items) {
  const int64_t cap =
      std::max<int64_t>(1, int64_t{ctx.props.multiProcessorCount} * kConvBlocksPerSm);
  return static_cast<unsigned>(std::clamp<int64_t>(ceil_div(num_items, kConvThreads), 1, cap));
}

}  // namespace

void dflash2_conv(CudaContext& ctx, const TensorView& base, const TensorView& d, int64_t side,
                  int64_t group_size, int64_t block_size, const TensorView& x,
                  const TensorView& out) {
  const int64_t N = x.dim(0), H = x.dim(1);
  if (N == 0 || H == 0) return;
  const int64_t num_blocks = N / block_size;
  const auto* bp = static_cast<const bf16_t*>(base.data);
  const auto* dp = static_cast<const bf16_t*>(d.data);
  const auto* xp = static_cast<const bf16_t*>(x.data);
  auto* op = static_cast<bf16_t*>(out.data);
  if (H % 8 == 0 && group_size % 8 == 0 && all_aligned16(bp, xp, op)) {
    const int64_t items = num_blocks * (H / 8);
    conv_kernel<8><<<grid_for(ctx, items), kConvThreads, 0, ctx.stream>>>(
        bp, dp, xp, op, items, H, group_size, block_size, side);
  } else {
    const int64_t items = num_blocks * H;
    conv_kernel<1><<<grid_for(ctx, items), kConvThreads, 0, ctx.stream>>>(
        bp, dp, xp, op, items, H, group_size, block_size, side);
  }
  CUDA_LAUNCH_OK();
}

void dflash2_store_context(CudaContext& ctx, const TensorView& k, const TensorView& v,
                           const TensorView& slots, const TensorView& positions,
                           const TensorView& keys, const TensorView& values,
                           const TensorView& slot_positions) {
  const int64_t T = k.dim(0), num_slots = keys.dim(0);
  if (T == 0) return;
  const int64_t width = k.numel() / T;
  const auto* sp = static_cast<const int64_t*>(slots.data);
  const auto* pp = positions.numel() > 0 ? static_cast<const int64_t*>(positions.data) : nullptr;
  auto* spp = static_cast<int64_t*>(slot_positions.data);
  const unsigned blocks = static_cast<unsigned>(T);
  if (width % 8 == 0 && all_aligned16(k.data, v.data, keys.data, values.data)) {
    const int64_t units = width / 8;
    const int threads = static_cast<int>(std::min<int64_t>(256, ceil_div(units, 32) * 32));
    store_context_kernel<uint4><<<blocks, threads, 0, ctx.stream>>>(
        static_cast<const uint4*>(k.data), static_cast<const uint4*>(v.data), sp, pp,
        static_cast<uint4*>(keys.data), static_cast<uint4*>(values.data), spp, num_slots, units);
  } else {
    const int threads = static_cast<int>(std::min<int64_t>(256, ceil_div(width, 32) * 32));
    store_context_kernel<bf16_t><<<blocks, threads, 0, ctx.stream>>>(
        static_cast<const bf16_t*>(k.data), static_cast<const bf16_t*>(v.data), sp, pp,
        static_cast<bf16_t*>(keys.data), static_cast<bf16_t*>(values.data), spp, num_slots, width);
  }
  CUDA_LAUNCH_OK();
}

void dflash2_select(CudaContext& ctx, const TensorView& u, const TensorView& hp,
                    const TensorView& predecessor, const TensorView& successor,
                    const TensorView& anchors, const TensorView& candidates,
                    const TensorView& scores, const TensorView& drafts) {
  constexpr const char* op = "dflash2_select (CUDA)";
  const int64_t R = u.dim(0), V = u.dim(1), K = candidates.dim(1), rank = hp.dim(1);
  const int64_t S = anchors.dim(0);
  if (R == 0 || S == 0) return;
  BEAM_CHECK(K >= 1 && K <= kMaxTopK && K <= V) << op << ": top " << K << " of " << V;
  BEAM_CHECK(V <= INT32_MAX && rank * int64_t{sizeof(float)} <= 48 * 1024)
      << op << ": vocabulary " << V << ", rank " << rank;
  const auto* up = static_cast<const float*>(u.data);
  auto* cp = static_cast<int32_t*>(candidates.data);
  const int k = static_cast<int>(K);
  BEAM_CHECK(R <= 65535) << op << ": " << R << " rows (a grid dimension)";
  const bool packed = V % 4 == 0 && aligned16(up);
  // Slices of a multiple of 4 logits keep each slice's float4s aligned.
  const int64_t slice = ceil_div(ceil_div(V, top_k_slices(ctx, R, V, K)), int64_t{4}) * 4;
  const int64_t slices = ceil_div(V, slice);
  BEAM_CHECK(slice <= kMaxSliceKeys)
      << op << ": a vocabulary of " << V << " needs slices of " << slice << " logits for top "
      << K << " (the merge holds " << kTopCapacity << " keys; slices at most " << kMaxSliceKeys
      << ")";
  const auto* hpp = static_cast<const bf16_t*>(hp.data);
  const auto* pp = static_cast<const bf16_t*>(predecessor.data);
  const auto* sp = static_cast<const bf16_t*>(successor.data);
  const int J = static_cast<int>(R / S), r = static_cast<int>(rank);
  const size_t paired = PairStage(k, r).bytes;
  const bool pair_walk = rank % 8 == 0 && all_aligned16(sp, pp, hpp) &&
                         paired <= static_cast<size_t>(ctx.props.sharedMemPerBlockOptin) &&
                         R * K * K * int64_t{sizeof(float)} <= kMaxPairBytes;
  // One scratch for the slices' keys, then (after the merge) the pair scores [R, K, K] f32.
  const size_t partial_bytes =
      slices > 1 ? static_cast<size_t>(R * slices * K) * sizeof(unsigned long long) : 0;
  const size_t pair_bytes = pair_walk ? static_cast<size_t>(R * K * K) * sizeof(float) : 0;
  char* scratch = partial_bytes + pair_bytes > 0
                      ? ctx.dflash2_select.reserve(std::max(partial_bytes, pair_bytes),
                                                   ctx.stream, op)
                      : nullptr;
  auto* partial = reinterpret_cast<unsigned long long*>(scratch);
  const dim3 grid(static_cast<unsigned>(slices), static_cast<unsigned>(R));
  if (packed) {
    slice_top_k_kernel<4><<<grid, kTopThreads, 0, ctx.stream>>>(up, V, slice, k, cp, partial);
  } else {
    slice_top_k_kernel<1><<<grid, kTopThreads, 0, ctx.stream>>>(up, V, slice, k, cp, partial);
  }
  CUDA_LAUNCH_OK();
  if (slices > 1) {
    merge_top_k_kernel<<<static_cast<unsigned>(R), kTopThreads, 0, ctx.stream>>>(
        partial, static_cast<int>(slices), k, cp);
    CUDA_LAUNCH_OK();
  }
  const auto* ap = static_cast<const int32_t*>(anchors.data);
  auto* scp = static_cast<float*>(scores.data);
  auto* dp = static_cast<int32_t*>(drafts.data);
  const size_t smem = static_cast<size_t>(rank) * sizeof(float);
  const unsigned blocks = static_cast<unsigned>(S);
  if (pair_walk) {
    if (paired > 48 * 1024)
      CUDA_OK(cudaFuncSetAttribute(pair_scores_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(paired)));
    auto* pairs = reinterpret_cast<float*>(scratch);
    pair_scores_kernel<<<dim3(static_cast<unsigned>(J), blocks), kWalkThreads, paired,
                         ctx.stream>>>(up, hpp, pp, sp, ap, cp, pairs, V, r, k, J);
    CUDA_LAUNCH_OK();
    walk_pick_kernel<<<blocks, 32, 0, ctx.stream>>>(pairs, cp, scp, dp, k, J);
  } else if (rank % 8 == 0 && aligned16(sp)) {
    walk_kernel<8>
        <<<blocks, kWalkThreads, smem, ctx.stream>>>(up, hpp, pp, sp, ap, cp, scp, dp, V, r, k, J);
  } else {
    walk_kernel<1>
        <<<blocks, kWalkThreads, smem, ctx.stream>>>(up, hpp, pp, sp, ap, cp, scp, dp, V, r, k, J);
  }
  CUDA_LAUNCH_OK();
}

}  // namespace beam::cuda
