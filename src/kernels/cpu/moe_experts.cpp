// CPU routed experts. Token slots are grouped by expert (counting sort, so each expert's weights
// are streamed once per call); each expert runs gate_up GEMM -> SwiGLU -> down GEMM with bf16
// outputs (with per-request LoRA, lora.h's deltas added to the rounded gate / up outputs and to the
// rounded expert output, each expert's rows as a batch of their tokens' slots); the combine then
// sums w_k * f32(y_k) in fp32 in slot order k (kNoExpert slots skipped) and rounds once (an f32
// out keeps the sum).
#include <algorithm>
#include <optional>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/lora.h"
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

// One expert's rows under per-request LoRA: their tokens' slots and, when any has an adapter,
// lora_add of each expert matrix on them.
class ExpertRowsLora {
 public:
  // Rows [offset[e], offset[e + 1]) of b; x: [T, H] bf16.
  ExpertRowsLora(const MoeLora& lora, const ExpertBuckets& b, int64_t e, const TensorView& x)
      : lora_(lora), e_(e), n_(b.offset[e + 1] - b.offset[e]), slots_(static_cast<size_t>(n_)) {
    const auto* token_slot = lora.slots.as<int32_t>();
    bool any = false;
    for (int64_t r = 0; r < n_; ++r) {
      slots_[r] = token_slot[b.token[b.offset[e] + r]];
      any = any || slots_[r] != kNoLoraSlot;
    }
    if (!any) return;
    const int64_t H = x.dim(1);
    x_.resize(static_cast<size_t>(n_ * H));
    for (int64_t r = 0; r < n_; ++r)
      std::copy_n(x.as<bf16>() + b.token[b.offset[e] + r] * H, H, &x_[r * H]);
    active_ = true;
  }

  // gu: [n, 2 * I] bf16, the rows' rounded gate then up outputs.
  void add_gate_up(ThreadPool& pool, bf16* gu, int64_t I) const {
    if (!active_) return;
    const int64_t H = lora_.gate.a.dim(3);
    const TensorView x = cpu_view(x_.data(), {n_, H});
    const TensorView out = cpu_view(gu, {n_, 2 * I});
    lora_add(pool, x, lora_.gate.of_expert(e_), slots_view(), out, 0);
    lora_add(pool, x, lora_.up.of_expert(e_), slots_view(), out, I);
  }

  // act: [n, I] (bf16 values in f32); y: [n, H] bf16, the rows' rounded expert outputs.
  void add_down(ThreadPool& pool, const float* act, int64_t I, bf16* y, int64_t H) const {
    if (!active_) return;
    std::vector<bf16> a(static_cast<size_t>(n_ * I));
    narrow_to_bf16(act, a.data(), n_ * I);  // exact: each value is already a bf16
    lora_add(pool, cpu_view(a.data(), {n_, I}), lora_.down.of_expert(e_), slots_view(),
             cpu_view(y, {n_, H}), 0);
  }

 private:
  static TensorView cpu_view(const bf16* p, Shape shape) {
    return TensorView{const_cast<bf16*>(p), DType::kBF16, std::move(shape), Device::kCpu};
  }
  TensorView slots_view() const {
    return TensorView{const_cast<int32_t*>(slots_.data()), DType::kI32, {n_}, Device::kCpu};
  }

  const MoeLora& lora_;
  int64_t e_, n_;
  std::vector<int32_t> slots_;
  std::vector<bf16> x_;
  bool active_ = false;
};

}  // namespace

void moe_experts(ThreadPool& pool, const TensorView& x, const TensorView& gate_up,
                 const TensorView& down, const TensorView& ids, const TensorView& weights,
                 const TensorView& out, GemmPath path, const MoeLora* lora) {
  const int64_t T = x.dim(0), H = x.dim(1), E = gate_up.dim(0), I = gate_up.dim(1) / 2;
  const int64_t top_k = ids.dim(1);
  const ExpertBuckets b = bucket_by_expert(ids.as<int32_t>(), T, top_k, E);

  std::vector<float> xf(static_cast<size_t>(T * H));
  widen_bf16(x.as<bf16>(), xf.data(), T * H);
  std::vector<bf16> y(static_cast<size_t>(T * top_k * H));  // [entry, H] expert outputs
  // One thread's buffers for the experts it runs (grown to the largest expert's rows).
  struct Scratch {
    std::vector<float> xe, act;
    std::vector<bf16> gu;
  };
  // Expert e's rows: gate_up GEMM, SwiGLU, down GEMM into y, each GEMM split over `on`.
  const auto run_expert = [&](ThreadPool& on, int64_t e, Scratch& s) {
    const int64_t n = b.offset[e + 1] - b.offset[e];
    if (n == 0) return;
    std::vector<float>& xe = s.xe;
    xe.resize(static_cast<size_t>(n * H));
    for (int64_t r = 0; r < n; ++r) std::copy_n(&xf[b.token[b.offset[e] + r] * H], H, &xe[r * H]);
    std::vector<bf16>& gu = s.gu;
    gu.resize(static_cast<size_t>(n * 2 * I));
    gemm(on, xe.data(), n, H, gate_up.as<bf16>() + e * 2 * I * H, 2 * I, gu.data(), 2 * I, path);
    const std::optional<ExpertRowsLora> rows_lora =
        lora ? std::optional<ExpertRowsLora>(std::in_place, *lora, b, e, x) : std::nullopt;
    if (rows_lora) rows_lora->add_gate_up(on, gu.data(), I);
    std::vector<float>& act = s.act;
    act.resize(static_cast<size_t>(n * I));
    swiglu_rows(gu.data(), n, I, act.data());
    gemm(on, act.data(), n, I, down.as<bf16>() + e * H * I, H, &y[b.offset[e] * H], H, path);
    if (rows_lora) rows_lora->add_down(on, act.data(), I, &y[b.offset[e] * H], H);
  };
  // When no expert holds more than one thread's share of the rows (a decode step's few rows an
  // expert, whose GEMMs are too small to split), the experts run side by side, each whole on one
  // thread; otherwise one after another, each GEMM split over the pool. Either way each output
  // is computed by the same code on the same rows: the same bits.
  int64_t busiest = 0;
  for (int64_t e = 0; e < E; ++e) busiest = std::max(busiest, b.offset[e + 1] - b.offset[e]);
  if (pool.num_threads() > 1 && busiest * pool.num_threads() <= b.offset[E]) {
    pool.parallel_for(E, 1, [&](int64_t e0, int64_t e1) {
      ThreadPool one_thread(1);  // no workers: its parallel_for runs inline
      Scratch s;
      for (int64_t e = e0; e < e1; ++e) run_expert(one_thread, e, s);
    });
  } else {
    Scratch s;
    for (int64_t e = 0; e < E; ++e) run_expert(pool, e, s);
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
      if (out.dtype == DType::kF32)
        std::copy(acc.begin(), acc.end(), out.as<float>() + t * H);
      else
        narrow_to_bf16(acc.data(), out.as<bf16>() + t * H, H);
    }
  });
}

}  // namespace beam::cpu
