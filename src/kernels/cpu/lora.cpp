// CPU LoRA deltas: each slot's tokens, gathered in order up to 64 at a time (a sequence's run, or
// a decode batch's tokens of one adapter wherever they sit), are two GEMMs of kernels/cpu/gemm.h
// on its register-tile path — the shrink h = scale · x·Aᵀ and the expand B·h — whose every element
// is vec.h's fixed-order dot product (so the bits do not depend on which tokens share a GEMM or on
// the threads), then the deltas are added to their tokens' columns of out with one rounding. A
// slot's factors are read once a gather, not once a token.
#include "kernels/cpu/lora.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/vec.h"

namespace beam::cpu {
namespace {

// Rows of one GEMM chunk: up to 64, fewer for wide outputs (the deltas stay within ~16 MB).
int64_t chunk_rows(int64_t n) {
  return std::clamp<int64_t>((int64_t{4} << 20) / n, 1, 64);
}

// out[M, N] = x[M, K] · w[N, K]ᵀ in fp32 on the register tiles; small products on this thread (a
// decode token's: waking the pool costs more than the work).
void tile_gemm(ThreadPool& pool, const float* x, int64_t M, int64_t K, const bf16* w, int64_t N,
               float* out) {
  if (M * N * K < (int64_t{1} << 21)) {
    gemm_serial(x, M, K, w, N, out, N);
  } else {
    gemm(pool, x, M, K, w, N, out, N, GemmPath::kTiles);
  }
}

// Each slot's tokens in order: order[first[s] .. first[s + 1]) are slot s's (a counting sort;
// tokens without a slot are left out).
struct SlotTokens {
  std::vector<size_t> first;   // [S + 1]
  std::vector<int64_t> order;  // token indices
  size_t largest = 0;          // the most tokens of one slot
};

// slot: [T]; a slot outside [kNoLoraSlot, S) aborts.
SlotTokens tokens_by_slot(const int32_t* slot, int64_t T, int64_t S) {
  SlotTokens g{std::vector<size_t>(static_cast<size_t>(S) + 1, 0), {}};
  for (int64_t t = 0; t < T; ++t) {
    BEAM_CHECK(slot[t] >= kNoLoraSlot && slot[t] < S)
        << "lora_add: token " << t << " has slot " << slot[t] << " of " << S;
    if (slot[t] != kNoLoraSlot) ++g.first[static_cast<size_t>(slot[t]) + 1];
  }
  for (size_t s = 1; s < g.first.size(); ++s) {
    g.largest = std::max(g.largest, g.first[s]);
    g.first[s] += g.first[s - 1];
  }
  g.order.resize(g.first.back());
  std::vector<size_t> next(g.first.begin(), g.first.end() - 1);
  for (int64_t t = 0; t < T; ++t)
    if (slot[t] != kNoLoraSlot) g.order[next[static_cast<size_t>(slot[t])]++] = t;
  return g;
}

}  // namespace

void lora_add(ThreadPool& pool, const TensorView& x, const LoraStack& stack,
              const TensorView& slots, const TensorView& out, int64_t col0) {
  const int64_t T = x.dim(0), in = x.dim(1);
  const int64_t S = stack.a.dim(0), r = stack.a.dim(1), n = stack.b.dim(1), N = out.dim(1);
  const auto* xs = static_cast<const bf16*>(x.data);
  const auto* a = static_cast<const bf16*>(stack.a.data);
  const auto* b = static_cast<const bf16*>(stack.b.data);
  const auto* scale = static_cast<const float*>(stack.scale.data);
  const auto* slot = static_cast<const int32_t*>(slots.data);
  auto* o = static_cast<bf16*>(out.data);
  const SlotTokens groups = tokens_by_slot(slot, T, S);
  // (no gather needs more rows than the largest slot's tokens)
  const int64_t rows = std::min(chunk_rows(n), static_cast<int64_t>(groups.largest));
  std::vector<float> xf(static_cast<size_t>(rows * in)), h(static_cast<size_t>(rows * r)),
      delta(static_cast<size_t>(rows * n));
  for (int64_t s = 0; s < S; ++s) {
    const size_t end = groups.first[static_cast<size_t>(s) + 1];
    for (size_t g0 = groups.first[static_cast<size_t>(s)]; g0 < end;) {
      const auto M = static_cast<int64_t>(std::min(static_cast<size_t>(rows), end - g0));
      const int64_t* tokens = groups.order.data() + g0;
      for (int64_t m = 0; m < M; ++m) widen_bf16(xs + tokens[m] * in, xf.data() + m * in, in);
      tile_gemm(pool, xf.data(), M, in, a + s * r * in, r, h.data());
      for (int64_t i = 0; i < M * r; ++i) h[static_cast<size_t>(i)] *= scale[s];
      tile_gemm(pool, h.data(), M, r, b + s * n * r, n, delta.data());
      const auto add_rows = [&](int64_t m0, int64_t m1) {
        for (int64_t m = m0; m < m1; ++m) {
          bf16* row = o + tokens[m] * N + col0;
          const float* d = delta.data() + m * n;
          for (int64_t c = 0; c < n; ++c) row[c] = to_bf16(to_float(row[c]) + d[c]);
        }
      };
      if (M * n < (int64_t{1} << 16)) {
        add_rows(0, M);  // a decode token's row: cheaper than waking the pool
      } else {
        pool.parallel_for(M, 1, add_rows);
      }
      g0 += static_cast<size_t>(M);
    }
  }
}

}  // namespace beam::cpu
