// CPU routed experts. Token slots are grouped by expert (counting sort, so each expert's weights
// are streamed once per call); each expert runs gate_up GEMM -> SwiGLU -> down GEMM with bf16
// outputs; the combine then sums w_k * f32(y_k) in fp32 in slot order k (kNoExpert slots skipped)
// and rounds once.
#include <algorithm>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/moe.h"
#include "kernels/cpu/torch_math.h"
#include "kernels/cpu/vec.h"

namespace beam::cpu {
namespace {

// Token slots (t, k) grouped by expert: entries [offset[e], offset[e+1]) belong to expert e, in
// increasing (t, k); entry_of[t * top_k + k] is the entry of slot (t, k), -1 for a kNoExpert slot.
struct ExpertBuckets {
  std::vector<int64_t> offset;
  std::vector<int64_t> token;
  std::vector<int64_t> entry_of;
};

ExpertBuckets bucket_by_expert(const int32_t* ids, int64_t T, int64_t top_k, int64_t E) {
  ExpertBuckets b;
  b.offset.assign(static_cast<size_t>(E + 1), 0);
  for (int64_t i = 0; i < T * top_k; ++i) {
    if (ids[i] == kNoExpert) continue;
    BEAM_CHECK(ids[i] >= 0 && ids[i] < E)
        << "moe_experts: token " << i / top_k << " routed to expert " << ids[i] << " of " << E;
    ++b.offset[ids[i] + 1];
  }
  for (int64_t e = 0; e < E; ++e) b.offset[e + 1] += b.offset[e];
  std::vector<int64_t> fill(b.offset.begin(), b.offset.end() - 1);
  b.token.resize(static_cast<size_t>(T * top_k));
  b.entry_of.resize(static_cast<size_t>(T * top_k));
  for (int64_t i = 0; i < T * top_k; ++i) {
    if (ids[i] == kNoExpert) {
      b.entry_of[i] = -1;
      continue;
    }
    const int64_t entry = fill[ids[i]]++;
    b.token[entry] = i / top_k;
    b.entry_of[i] = entry;
  }
  return b;
}

// act[i] = f32(bf16(silu(f32(gate[i])) * f32(up[i]))) for n rows; gate_up rows are [gate | up].
void swiglu_rows(const bf16* gate_up, int64_t n, int64_t I, float* act) {
  for (int64_t r = 0; r < n; ++r) {
    const bf16* gate = gate_up + r * 2 * I;
    const bf16* up = gate + I;
    for (int64_t i = 0; i < I; ++i)
      act[r * I + i] = round_bf16(torch_siluf(to_float(gate[i])) * to_float(up[i]));
  }
}

}  // namespace

void moe_experts(ThreadPool& pool, const TensorView& x, const TensorView& gate_up,
                 const TensorView& down, const TensorView& ids, const TensorView& weights,
                 const TensorView& out, GemmPath path) {
  const int64_t T = x.dim(0), H = x.dim(1), E = gate_up.dim(0), I = gate_up.dim(1) / 2;
  const int64_t top_k = ids.dim(1);
  const ExpertBuckets b = bucket_by_expert(ids.as<int32_t>(), T, top_k, E);

  std::vector<float> xf(static_cast<size_t>(T * H));
  widen_bf16(x.as<bf16>(), xf.data(), T * H);
  std::vector<bf16> y(static_cast<size_t>(T * top_k * H));  // [entry, H] expert outputs
  std::vector<float> xe, act;
  std::vector<bf16> gu;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = b.offset[e + 1] - b.offset[e];
    if (n == 0) continue;
    xe.resize(static_cast<size_t>(n * H));
    for (int64_t r = 0; r < n; ++r) std::copy_n(&xf[b.token[b.offset[e] + r] * H], H, &xe[r * H]);
    gu.resize(static_cast<size_t>(n * 2 * I));
    gemm(pool, xe.data(), n, H, gate_up.as<bf16>() + e * 2 * I * H, 2 * I, gu.data(), 2 * I, path);
    act.resize(static_cast<size_t>(n * I));
    swiglu_rows(gu.data(), n, I, act.data());
    gemm(pool, act.data(), n, I, down.as<bf16>() + e * H * I, H, &y[b.offset[e] * H], H, path);
  }

  pool.parallel_for(T, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> acc(static_cast<size_t>(H));
    for (int64_t t = t0; t < t1; ++t) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t k = 0; k < top_k; ++k) {
        const int64_t entry = b.entry_of[t * top_k + k];
        if (entry < 0) continue;  // no expert
        const float w = weights.as<float>()[t * top_k + k];
        const bf16* yk = &y[entry * H];
        for (int64_t h = 0; h < H; ++h) acc[h] = acc[h] + w * to_float(yk[h]);
      }
      narrow_to_bf16(acc.data(), out.as<bf16>() + t * H, H);
    }
  });
}

}  // namespace beam::cpu
