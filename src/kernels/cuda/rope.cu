// CUDA RoPE and SSMax with kernels/cpu/rope.cpp's rounding points. inv_freq comes from the host
// (bit-identical to PyTorch's); angles are the same single fp32 product; cos/sin/pow use CUDA's
// accurate fp32 functions (not SLEEF's), so a bf16-rounded cos/sin or an SSMax factor can differ
// from the CPU's in rare elements (tests/unit/kernels_cuda/rope_test.cpp measures how rare).
#include "kernels/cuda/rope.h"

#include "core/check.h"
#include "kernels/api/rope.h"
#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/check.h"

namespace beam::cuda {
namespace {

constexpr int kMaxHalfDim = 256;  // head_dim <= 512
constexpr int kRopeThreads = 128;
constexpr int kSsmaxThreads = 256;

// inv_freq[0 .. D/2), passed by value as a kernel parameter: no device memory, and a captured
// CUDA graph keeps the values.
struct InvFreq {
  float v[kMaxHalfDim];
};

// One block per token: the token's bf16 cos/sin half-table in shared memory (HF's table is
// cat(angles, angles), so entries d and d + D/2 are equal), then every q and k head rotated:
//   lo = bf16(bf16(x1 * cos) + bf16(-x2 * sin)), hi = bf16(bf16(x2 * cos) + bf16(x1 * sin)).
template <int N>
__global__ void rope_tokens(bf16_t* q, bf16_t* k, const int64_t* positions, int num_q_heads,
                            int num_kv_heads, int half, InvFreq inv_freq) {
  __shared__ float cos_s[kMaxHalfDim], sin_s[kMaxHalfDim];
  const int64_t t = blockIdx.x;
  const float p = __ll2float_rn(positions[t]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float s, c;
    sincosf(__fmul_rn(p, inv_freq.v[i]), &s, &c);
    cos_s[i] = round_bf16(c);
    sin_s[i] = round_bf16(s);
  }
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
      lo.v[i] = round_bf16(x1.v[i] * c) + round_bf16(-x2.v[i] * s);
      hi.v[i] = round_bf16(x2.v[i] * c) + round_bf16(x1.v[i] * s);
    }
    store_bf16<N>(row + d0, lo);
    store_bf16<N>(row + half + d0, hi);
  }
}

// One block per token: q = bf16(f32(q) * s(p)), s(p) = (1 + (fp32(p) + 1) / 2048)^0.1 in fp32.
template <int N>
__global__ void ssmax_tokens(bf16_t* q, const int64_t* positions, int64_t width) {
  const int64_t t = blockIdx.x;
  const float base = __fadd_rn(1.0f, __fdiv_rn(__fadd_rn(__ll2float_rn(positions[t]), 1.0f),
                                               2048.0f));
  const float s = powf(base, 0.1f);
  bf16_t* row = q + t * width;
  for (int64_t g = threadIdx.x; g < width / N; g += blockDim.x) {
    Pack<N> x = load_bf16<N>(row + g * N);
#pragma unroll
    for (int i = 0; i < N; ++i) x.v[i] = x.v[i] * s;
    store_bf16<N>(row + g * N, x);
  }
}

}  // namespace

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
