// CPU elementwise ops with BEAM.md's rounding points (§3.7 gate, §3.9 SwiGLU, §3.11 softcap).
// Transcendentals use torch_math.h so fp32 values match PyTorch's before each bf16 rounding.
#include "kernels/cpu/activation.h"

#include <cstring>

#include "core/bf16.h"
#include "kernels/cpu/torch_math.h"

namespace beam::cpu {
namespace {

// Rows per task so that a task handles at least ~8K elements.
int64_t min_rows(int64_t row_elems) {
  return row_elems >= 8192 ? 1 : 8192 / row_elems + 1;
}

}  // namespace

void output_gate(ThreadPool& pool, const TensorView& o, const TensorView& g,
                 const TensorView& bias) {
  const int64_t T = o.dim(0), width = o.dim(1), Nq = bias.dim(0), D = width / Nq;
  pool.parallel_for(T, min_rows(width), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      bf16* orow = o.as<bf16>() + t * width;
      const bf16* grow = g.as<bf16>() + t * width;
      for (int64_t h = 0; h < Nq; ++h) {
        const float b = to_float(bias.as<bf16>()[h]);
        for (int64_t d = h * D; d < (h + 1) * D; ++d) {
          const float pre = round_bf16(to_float(grow[d]) + b);
          const float s = round_bf16(torch_sigmoidf(pre));
          orow[d] = to_bf16(to_float(orow[d]) * s);
        }
      }
    }
  });
}

void swiglu(ThreadPool& pool, const TensorView& gate_up, const TensorView& act) {
  const int64_t T = act.dim(0), I = act.dim(1);
  pool.parallel_for(T, min_rows(I), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const bf16* gate = gate_up.as<bf16>() + t * 2 * I;
      const bf16* up = gate + I;
      bf16* out = act.as<bf16>() + t * I;
      for (int64_t i = 0; i < I; ++i)
        out[i] = to_bf16(torch_siluf(to_float(gate[i])) * to_float(up[i]));
    }
  });
}

void softcap(ThreadPool& pool, const TensorView& z, float cap, float multiplier,
             const TensorView& logits) {
  const int64_t T = z.dim(0), V = z.dim(1);
  const int64_t n = T * V;
  pool.parallel_for(n, 8192, [&](int64_t i0, int64_t i1) {
    const bf16* src = z.as<bf16>();
    float* dst = logits.as<float>();
    if (cap > 0.0f) {
      for (int64_t i = i0; i < i1; ++i)
        dst[i] = cap * torch_tanhf(to_float(src[i]) * multiplier / cap);
    } else {
      for (int64_t i = i0; i < i1; ++i) dst[i] = to_float(src[i]) * multiplier;
    }
  });
}

void add_rounded(ThreadPool& pool, const TensorView& a, const TensorView& b,
                 const TensorView& out) {
  const bf16* x = a.as<bf16>();
  const bf16* y = b.as<bf16>();
  bf16* o = out.as<bf16>();
  pool.parallel_for(a.numel(), 8192, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) o[i] = to_bf16(to_float(x[i]) + to_float(y[i]));
  });
}

void embedding(ThreadPool& pool, const TensorView& table, const TensorView& ids,
               const TensorView& out) {
  const int64_t T = ids.dim(0), V = table.dim(0), H = table.dim(1);
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = ids.as<int32_t>()[t];
    BEAM_CHECK(id >= 0 && id < V) << "embedding: token id " << id << " at row " << t
                                  << " outside the table of " << V << " rows";
  }
  pool.parallel_for(T, min_rows(H), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t id = ids.as<int32_t>()[t];
      std::memcpy(out.as<bf16>() + t * H, table.as<bf16>() + id * H, H * sizeof(bf16));
    }
  });
}

}  // namespace beam::cpu
