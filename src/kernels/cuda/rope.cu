// CUDA RoPE and SSMax with kernels/cpu/rope.cpp's rounding points, alone or fused after the
// per-head q/k RMSNorm (one launch, bit-identical to rms_norm + apply_rope / apply_ssmax here),
// optionally also writing the final k and v rows into the paged KV pool (+ store_kv).
// inv_freq comes from the host (bit-identical to PyTorch's); angles are the same single fp32
// product; cos/sin/pow use CUDA's accurate fp32 functions (not SLEEF's), so a bf16-rounded cos/sin
// or an SSMax factor can differ from the CPU's in rare elements (tests/unit/kernels_cuda/
// rope_test.cpp measures how rare).
#include "kernels/cuda/rope.h"

#include "core/check.h"
#include "kernels/api/rope.h"
#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/norm_math.cuh"

namespace beam::cuda {
namespace {

constexpr int kMaxHalfDim = 256;  // head_dim <= 512
constexpr int kRopeThreads = 128;
constexpr int kSsmaxThreads = 256;
constexpr int kQkWarps = 8;             // warps per block of qk_norm_position
constexpr int64_t kQkMaxHeadDim = 256;  // one 8-wide pack per lane
constexpr int64_t kQkWideTokens = 64;   // from here on, one qk_norm_position block per token

// inv_freq[0 .. D/2), passed by value as a kernel parameter: no device memory, and a captured
// CUDA graph keeps the values.
struct InvFreq {
  float v[kMaxHalfDim];
};

// The bf16 cos/sin half-table of one position (HF's table is cat(angles, angles), so entries d
// and d + D/2 are equal), entries [0, half) written by the block's threads; the caller syncs.
__device__ __forceinline__ void rope_table(int64_t position, int half, const InvFreq& inv_freq,
                                           float* cos_s, float* sin_s) {
  const float p = __ll2float_rn(position);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float s, c;
    sincosf(__fmul_rn(p, inv_freq.v[i]), &s, &c);
    cos_s[i] = round_bf16(c);
    sin_s[i] = round_bf16(s);
  }
}

// lo = bf16(x1 * cos) + bf16(-x2 * sin) before its rounding (element d < D/2 of the head).
__device__ __forceinline__ float rotate_lo(float x1, float x2, float c, float s) {
  return round_bf16(x1 * c) + round_bf16(-x2 * s);
}
// hi = bf16(x2 * cos) + bf16(x1 * sin) before its rounding (element d + D/2).
__device__ __forceinline__ float rotate_hi(float x1, float x2, float c, float s) {
  return round_bf16(x2 * c) + round_bf16(x1 * s);
}

// s(p) = (1 + (fp32(p) + 1) / 2048)^0.1 in fp32.
__device__ __forceinline__ float ssmax_factor(int64_t position) {
  const float base =
      __fadd_rn(1.0f, __fdiv_rn(__fadd_rn(__ll2float_rn(position), 1.0f), 2048.0f));
  return powf(base, 0.1f);
}

// One block per token: the token's bf16 cos/sin half-table in shared memory, then every q and k
// head rotated (rotate_lo / rotate_hi, each rounded to bf16).
template <int N>
__global__ void rope_tokens(bf16_t* q, bf16_t* k, const int64_t* positions, int num_q_heads,
                            int num_kv_heads, int half, InvFreq inv_freq) {
  __shared__ float cos_s[kMaxHalfDim], sin_s[kMaxHalfDim];
  const int64_t t = blockIdx.x;
  rope_table(positions[t], half, inv_freq, cos_s, sin_s);
  __syncthreads();
  const int packs_per_head = half / N, head_dim = 2 * half;
  const int num_items = (num_q_heads + num_kv_heads) * packs_per_head;
  for (int j = threadIdx.x; j < num_items; j += blockDim.x) {
    const int head = j / packs_per_head, d0 = (j % packs_per_head) * N;
    bf16_t* row = head < num_q_heads
                      ? q + (t * num_q_heads + head) * head_dim
                      : k + (t * num_kv_heads + (head - num_q_heads)) * head_dim;
    const Pack<N> x1 = load_bf16<N>(row + d0), x2 = load_bf16<N>(row + half + d0);
    Pack<N> lo, hi;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const float c = cos_s[d0 + i], s = sin_s[d0 + i];
      lo.v[i] = rotate_lo(x1.v[i], x2.v[i], c, s);
      hi.v[i] = rotate_hi(x1.v[i], x2.v[i], c, s);
    }
    store_bf16<N>(row + d0, lo);
    store_bf16<N>(row + half + d0, hi);
  }
}

// One block per token: q = bf16(f32(q) * s(p)), s(p) = (1 + (fp32(p) + 1) / 2048)^0.1 in fp32.
template <int N>
__global__ void ssmax_tokens(bf16_t* q, const int64_t* positions, int64_t width) {
  const int64_t t = blockIdx.x;
  const float s = ssmax_factor(positions[t]);
  bf16_t* row = q + t * width;
  for (int64_t g = threadIdx.x; g < width / N; g += blockDim.x) {
    Pack<N> x = load_bf16<N>(row + g * N);
#pragma unroll
    for (int i = 0; i < N; ++i) x.v[i] = x.v[i] * s;
    store_bf16<N>(row + g * N, x);
  }
}

// ---- Fused per-head q/k RMSNorm + RoPE or SSMax ------------------------------------------------

enum class QkPosition { kRope, kSsmax };

// Operands of qk_norm_position: q [T, Nq, D], k [T, Nkv, D], q_norm / k_norm [D], positions [T];
// each block covers heads [b * heads_per_block, ...) (q heads first, then k heads) of one token.
// With k_cache set (store_kv fused), v [T, Nkv, D] and the final k rows also go to the pool:
// k_cache / v_cache [num_slots, Nkv, D], row t to slot slots[t] (skipped unless in [0, num_slots)).
struct QkArgs {
  bf16_t* q;
  bf16_t* k;
  const bf16_t* q_norm;
  const bf16_t* k_norm;
  const int64_t* positions;
  int num_q_heads, num_kv_heads, head_dim, blocks_per_token, heads_per_block;
  int head_lanes;  // lanes a head (qk_head_lanes): 32 / head_lanes heads a warp
  float eps;
  const bf16_t* v;
  const int64_t* slots;
  bf16_t* k_cache;
  bf16_t* v_cache;
  int64_t num_slots;
};

// Head h of token t (q heads first, then k heads): its row of q or k and its norm weight.
struct HeadRef {
  bf16_t* row;
  const bf16_t* w;
  bool is_q;
};
__device__ __forceinline__ HeadRef head_ref(const QkArgs& a, int64_t t, int h) {
  if (h < a.num_q_heads) return {a.q + (t * a.num_q_heads + h) * a.head_dim, a.q_norm, true};
  return {a.k + (t * a.num_kv_heads + (h - a.num_q_heads)) * a.head_dim, a.k_norm, false};
}

// Lanes per head in qk_norm_position: the power of two >= the head's 8-wide packs.
int qk_head_lanes(int64_t head_dim) {
  int lanes = 1;
  while (lanes * 8 < head_dim) lanes *= 2;
  return lanes;
}

// Sum over each aligned group of `lanes` lanes (a power of two): the last steps of warp_sum's
// butterfly, so a group whose other lanes hold zeros sums exactly as warp_sum would.
__device__ __forceinline__ float group_sum(float v, int lanes) {
  for (int o = lanes / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Each warp takes 32 / head_lanes heads at a time (D <= kQkMaxHeadDim, D % 16 == 0, 16-byte
// aligned rows), head_lanes lanes a head: lane l of its group holds the head's 8-wide pack l, so
// the norm sums exactly as rms_norm's 8-wide warp-per-row kernel (lane packs, then warp_sum over
// a warp whose other lanes hold zeros); y = bf16(x * inv_rms * w) is the norm's bf16 output. RoPE
// pairs pack l with pack l +- D/16 through a shuffle within the group; SSMax scales the q heads by
// s(p). A warp loads its next heads (the first ones before the cos/sin table) while it finishes
// the current ones.
template <QkPosition kPos>
__global__ void __launch_bounds__(kQkWarps * 32) qk_norm_position(QkArgs a, InvFreq inv_freq) {
  pdl_launch_dependents();  // the decode attention after it reads its plan meanwhile (launch.h)
  __shared__ float cos_s[kQkMaxHeadDim / 2], sin_s[kQkMaxHeadDim / 2];
  const int64_t t = blockIdx.x / a.blocks_per_token;
  const int head_begin = static_cast<int>(blockIdx.x % a.blocks_per_token) * a.heads_per_block;
  const int head_end = min(head_begin + a.heads_per_block, a.num_q_heads + a.num_kv_heads);
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int packs = a.head_dim / 8, half_packs = packs / 2;
  const int heads_per_warp = 32 / a.head_lanes, stride = kQkWarps * heads_per_warp;
  const int pack = lane % a.head_lanes, group_base = lane - pack;
  const bool active = pack < packs;  // lanes past the head hold zeros
  // This lane's head in the turn starting at `base` (uniform across the warp).
  const int slot = lane / a.head_lanes, first_base = head_begin + warp * heads_per_warp;
  Pack<8> x{}, wp{};
  if (first_base + slot < head_end && active) {
    const HeadRef first = head_ref(a, t, first_base + slot);
    x = load_bf16<8>(first.row + pack * 8);
    wp = load_bf16<8>(first.w + pack * 8);
  }
  // The pool row (slot * Nkv) of this token's k/v heads (store_kv fused), or -1: no store, or the
  // slot is -1 / outside the pool.
  int64_t cache_row = -1;
  if (a.k_cache != nullptr) {
    const int64_t kv_slot = a.slots[t];
    if (kv_slot >= 0 && kv_slot < a.num_slots) cache_row = kv_slot * a.num_kv_heads;
  }
  float scale = 1.0f;
  if constexpr (kPos == QkPosition::kRope) {
    rope_table(a.positions[t], a.head_dim / 2, inv_freq, cos_s, sin_s);
    __syncthreads();
  } else {
    scale = ssmax_factor(a.positions[t]);
  }
  for (int base = first_base; base < head_end; base += stride) {  // uniform across the warp
    const int h = base + slot;
    const bool mine = h < head_end && active;  // this lane holds a pack of a head of the turn
    const HeadRef ref = head_ref(a, t, min(h, head_end - 1));
    // store_kv of a k head: its v row goes to the pool as is (loaded now, stored below).
    const bool to_cache = mine && !ref.is_q && cache_row >= 0;
    const int64_t kvh = h - a.num_q_heads;
    uint4 v_pack{};
    if (to_cache)
      v_pack =
          *reinterpret_cast<const uint4*>(a.v + (t * a.num_kv_heads + kvh) * a.head_dim + pack * 8);
    float sum = 0.0f;
    if (mine) {
#pragma unroll
      for (int j = 0; j < 8; ++j) sum = fmaf(x.v[j], x.v[j], sum);
    }
    const float inv_rms = inv_rms_of(group_sum(sum, a.head_lanes), a.head_dim, a.eps);
    Pack<8> y;
#pragma unroll
    for (int j = 0; j < 8; ++j) y.v[j] = round_bf16(x.v[j] * inv_rms * wp.v[j]);
    if (h + stride < head_end && active) {  // the next turn's loads
      const HeadRef next = head_ref(a, t, h + stride);
      x = load_bf16<8>(next.row + pack * 8);
      wp = load_bf16<8>(next.w + pack * 8);
    }
    if constexpr (kPos == QkPosition::kRope) {
      const bool low = pack < half_packs;
      const int partner = group_base + (low ? pack + half_packs : pack - half_packs);
      Pack<8> other;
#pragma unroll
      for (int j = 0; j < 8; ++j) other.v[j] = __shfl_sync(0xffffffffu, y.v[j], partner);
      if (mine) {
        const int d0 = (low ? pack : pack - half_packs) * 8;
        Pack<8> out;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float c = cos_s[d0 + j], s = sin_s[d0 + j];
          out.v[j] = low ? rotate_lo(y.v[j], other.v[j], c, s) : rotate_hi(other.v[j], y.v[j], c, s);
        }
        store_bf16<8>(ref.row + pack * 8, out);
        if (to_cache) store_bf16<8>(a.k_cache + (cache_row + kvh) * a.head_dim + pack * 8, out);
      }
    } else if (mine) {
      if (ref.is_q) {
#pragma unroll
        for (int j = 0; j < 8; ++j) y.v[j] = y.v[j] * scale;
      }
      store_bf16<8>(ref.row + pack * 8, y);
      if (to_cache) store_bf16<8>(a.k_cache + (cache_row + kvh) * a.head_dim + pack * 8, y);
    }
    if (to_cache)
      *reinterpret_cast<uint4*>(a.v_cache + (cache_row + kvh) * a.head_dim + pack * 8) = v_pack;
  }
}

// One launch of qk_norm_position when the heads fit it (else false): small T spreads a token's
// heads over blocks of kQkWarps warps' heads; from kQkWideTokens tokens on, one block per token.
// With `store`, the launch also does store_kv (v and the pool must be 16-byte aligned as well).
bool launch_qk_norm(CudaContext& ctx, const QkTensors& qk, float eps, QkPosition pos,
                    float theta, const KvStore* store) {
  const int64_t T = qk.q.dim(0), D = qk.q.dim(2);
  const bool fits = D % 16 == 0 && D <= kQkMaxHeadDim &&
                    all_aligned16(qk.q.data, qk.k.data, qk.q_norm.data, qk.k_norm.data) &&
                    (store == nullptr ||
                     all_aligned16(store->v.data, store->cache.k.data, store->cache.v.data));
  if (!fits) return false;
  const int heads = static_cast<int>(qk.q.dim(1) + qk.k.dim(1));
  const int head_lanes = qk_head_lanes(D), heads_per_block = kQkWarps * (32 / head_lanes);
  QkArgs a{static_cast<bf16_t*>(qk.q.data),
           static_cast<bf16_t*>(qk.k.data),
           static_cast<const bf16_t*>(qk.q_norm.data),
           static_cast<const bf16_t*>(qk.k_norm.data),
           static_cast<const int64_t*>(qk.positions.data),
           static_cast<int>(qk.q.dim(1)),
           static_cast<int>(qk.k.dim(1)),
           static_cast<int>(D),
           T >= kQkWideTokens ? 1 : (heads + heads_per_block - 1) / heads_per_block,
           0,
           head_lanes,
           eps,
           nullptr,
           nullptr,
           nullptr,
           nullptr,
           0};
  if (store != nullptr) {
    a.v = static_cast<const bf16_t*>(store->v.data);
    a.slots = static_cast<const int64_t*>(store->slots.data);
    a.k_cache = static_cast<bf16_t*>(store->cache.k.data);
    a.v_cache = static_cast<bf16_t*>(store->cache.v.data);
    a.num_slots = store->cache.k.dim(0) * store->cache.k.dim(1);
  }
  a.heads_per_block = (heads + a.blocks_per_token - 1) / a.blocks_per_token;
  InvFreq inv_freq{};
  const auto blocks = static_cast<unsigned>(T * a.blocks_per_token);
  switch (pos) {
    case QkPosition::kRope:
      for (int64_t i = 0; i < D / 2; ++i) inv_freq.v[i] = rope_inv_freq(theta, i, D);
      qk_norm_position<QkPosition::kRope><<<blocks, kQkWarps * 32, 0, ctx.stream>>>(a, inv_freq);
      break;
    case QkPosition::kSsmax:
      qk_norm_position<QkPosition::kSsmax><<<blocks, kQkWarps * 32, 0, ctx.stream>>>(a, inv_freq);
      break;
  }
  CUDA_LAUNCH_OK();
  return true;
}

// The per-head norms as rms_norm over [T * heads, D] rows (the unfused path).
void norm_heads(CudaContext& ctx, const QkTensors& qk, float eps) {
  const int64_t T = qk.q.dim(0), D = qk.q.dim(2);
  const TensorView q2 = qk.q.reshape({T * qk.q.dim(1), D}), k2 = qk.k.reshape({T * qk.k.dim(1), D});
  rms_norm(ctx, q2, qk.q_norm, eps, q2);
  rms_norm(ctx, k2, qk.k_norm, eps, k2);
}

}  // namespace

void qk_norm_rope(CudaContext& ctx, const QkTensors& qk, float eps, float theta,
                  const KvStore* store) {
  if (qk.q.dim(0) == 0) return;
  if (launch_qk_norm(ctx, qk, eps, QkPosition::kRope, theta, store)) return;
  norm_heads(ctx, qk, eps);
  apply_rope(ctx, qk.q, qk.k, qk.positions, theta);
  if (store != nullptr) store_kv(ctx, qk.k, store->v, store->slots, store->cache);
}

void qk_norm_ssmax(CudaContext& ctx, const QkTensors& qk, float eps, const KvStore* store) {
  if (qk.q.dim(0) == 0) return;
  if (launch_qk_norm(ctx, qk, eps, QkPosition::kSsmax, 0.0f, store)) return;
  norm_heads(ctx, qk, eps);
  apply_ssmax(ctx, qk.q, qk.positions);
  if (store != nullptr) store_kv(ctx, qk.k, store->v, store->slots, store->cache);
}

void apply_rope(CudaContext& ctx, const TensorView& q, const TensorView& k,
                const TensorView& positions, float theta) {
  const int64_t T = q.dim(0), head_dim = q.dim(2), half = head_dim / 2;
  BEAM_CHECK(half <= kMaxHalfDim) << "apply_rope (CUDA): head_dim " << head_dim << " > "
                                  << 2 * kMaxHalfDim;
  if (T == 0 || half == 0) return;
  InvFreq inv_freq{};
  for (int64_t i = 0; i < half; ++i) inv_freq.v[i] = rope_inv_freq(theta, i, head_dim);
  auto* qp = static_cast<bf16_t*>(q.data);
  auto* kp = static_cast<bf16_t*>(k.data);
  const auto* pos = static_cast<const int64_t*>(positions.data);
  const int nq = static_cast<int>(q.dim(1)), nkv = static_cast<int>(k.dim(1));
  const int h = static_cast<int>(half);
  if (half % 8 == 0 && all_aligned16(qp, kp)) {
    rope_tokens<8><<<static_cast<unsigned>(T), kRopeThreads, 0, ctx.stream>>>(qp, kp, pos, nq, nkv,
                                                                             h, inv_freq);
  } else {
    rope_tokens<1><<<static_cast<unsigned>(T), kRopeThreads, 0, ctx.stream>>>(qp, kp, pos, nq, nkv,
                                                                             h, inv_freq);
  }
  CUDA_LAUNCH_OK();
}

void apply_ssmax(CudaContext& ctx, const TensorView& q, const TensorView& positions) {
  const int64_t T = q.dim(0), width = q.dim(1) * q.dim(2);
  if (T == 0 || width == 0) return;
  auto* qp = static_cast<bf16_t*>(q.data);
  const auto* pos = static_cast<const int64_t*>(positions.data);
  if (width % 8 == 0 && aligned16(qp)) {
    ssmax_tokens<8><<<static_cast<unsigned>(T), kSsmaxThreads, 0, ctx.stream>>>(qp, pos, width);
  } else {
    ssmax_tokens<1><<<static_cast<unsigned>(T), kSsmaxThreads, 0, ctx.stream>>>(qp, pos, width);
  }
  CUDA_LAUNCH_OK();
}

}  // namespace beam::cuda
