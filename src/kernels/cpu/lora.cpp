// CPU LoRA deltas: the shrink (h = scale · A·x, fp32) per token, then the expand added to out's
// columns, parallel over tokens and column blocks.
#include "kernels/cpu/lora.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/vec.h"

namespace beam::cpu {

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
  for (int64_t t = 0; t < T; ++t)
    BEAM_CHECK(slot[t] >= kNoLoraSlot && slot[t] < S)
        << "lora_add: token " << t << " has slot " << slot[t] << " of " << S;

  // The shrink: h[t] = scale · A_s · x[t] (tokens without a slot skip it).
  std::vector<float> h(static_cast<size_t>(T * r));
  pool.parallel_for(T, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> xf(static_cast<size_t>(in));
    for (int64_t t = begin; t < end; ++t) {
      if (slot[t] == kNoLoraSlot) continue;
      widen_bf16(xs + t * in, xf.data(), in);
      const bf16* as = a + slot[t] * r * in;
      for (int64_t j = 0; j < r; ++j) {
        float dot = 0;
        dot_tile<1, 1>(xf.data(), in, as + j * in, in, in, &dot);
        h[static_cast<size_t>(t * r + j)] = scale[slot[t]] * dot;
      }
    }
  });

  // The expand: out[t, col0 + c] = bf16(f32(out) + B_s[c] · h[t]), blocks of 256 columns.
  constexpr int64_t kCols = 256;
  const int64_t blocks = (n + kCols - 1) / kCols;
  pool.parallel_for(T * blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / blocks, c_begin = item % blocks * kCols;
      if (slot[t] == kNoLoraSlot) continue;
      const bf16* bs = b + slot[t] * n * r;
      const float* ht = h.data() + t * r;
      bf16* ot = o + t * N + col0;
      for (int64_t c = c_begin; c < std::min(n, c_begin + kCols); ++c) {
        float delta = 0;
        dot_tile<1, 1>(ht, r, bs + c * r, r, r, &delta);
        ot[c] = to_bf16(to_float(ot[c]) + delta);
      }
    }
  });
}

}  // namespace beam::cpu
