// plan_fixed_attention / fixed_paged_attention(_gated): validate like paged_attention, dispatch to
// CUDA.
#include "kernels/api/fixed_attention.h"

#include "kernels/api/checks.h"
#if BEAMSERVE_CUDA
#include "kernels/cuda/attention.h"
#endif

namespace beam {

using kernel_checks::cuda_backend_not_built;
using kernel_checks::expect_tensor;

namespace {

[[noreturn]] void cpu_has_no_fixed_attention(const char* op) {
  BEAM_CHECK(false) << op << ": fixed-grid attention exists for CUDA graphs only";
  __builtin_unreachable();
}

}  // namespace

void plan_fixed_attention(const KernelContext& ctx, int slot, const PagedKv& kv, int64_t num_rows,
                          int64_t num_heads, int64_t head_dim, std::span<const AttentionSeq> seqs,
                          int64_t window) {
  constexpr const char* op = "plan_fixed_attention";
  BEAM_CHECK(slot >= 0 && slot < kNumFixedAttentionSlots) << op << ": slot " << slot;
  BEAM_CHECK(window >= 0) << op << ": window " << window;
  expect_tensor(ctx, kv.k, DType::kBF16, 4, op, "kv.k");
  expect_tensor(ctx, kv.v, DType::kBF16, 4, op, "kv.v");
  BEAM_CHECK(kv.v.shape == kv.k.shape && kv.block_size > 0 && kv.k.dim(1) == kv.block_size &&
             kv.k.dim(3) == head_dim && num_heads % kv.k.dim(2) == 0)
      << op << ": cache " << kv.k.shape.str() << " (block_size " << kv.block_size << ") for "
      << num_heads << " heads of " << head_dim;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const AttentionSeq& s = seqs[i];
    BEAM_CHECK(s.q_begin >= 0 && s.q_count >= 0 && s.q_begin + s.q_count <= num_rows &&
               s.kv_pos0 >= 0 && s.kv_len >= 0)
        << op << ": sequence " << i << " rows " << s.q_begin << "+" << s.q_count << " of "
        << num_rows << ", kv_pos0 " << s.kv_pos0 << ", kv_len " << s.kv_len;
  }
  switch (ctx.device) {
    case Device::kCpu:
      cpu_has_no_fixed_attention(op);
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::plan_fixed_attention(*ctx.cuda, slot, kv, num_rows, num_heads, head_dim, seqs, window);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

void fixed_paged_attention(const KernelContext& ctx, int slot, const TensorView& q,
                           const PagedKv& kv, int64_t window, const TensorView& out) {
  constexpr const char* op = "fixed_paged_attention";
  BEAM_CHECK(slot >= 0 && slot < kNumFixedAttentionSlots) << op << ": slot " << slot;
  expect_tensor(ctx, q, DType::kBF16, 3, op, "q");
  expect_tensor(ctx, out, DType::kBF16, 3, op, "out");
  BEAM_CHECK(out.shape == q.shape) << op << ": q " << q.shape.str() << ", out " << out.shape.str();
  switch (ctx.device) {
    case Device::kCpu:
      cpu_has_no_fixed_attention(op);
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::fixed_paged_attention(*ctx.cuda, slot, q, kv, window, out);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

void fixed_paged_attention_gated(const KernelContext& ctx, int slot, const TensorView& q,
                                 const PagedKv& kv, int64_t window, const AttentionGate& gate,
                                 const TensorView& out) {
  constexpr const char* op = "fixed_paged_attention_gated";
  BEAM_CHECK(slot >= 0 && slot < kNumFixedAttentionSlots) << op << ": slot " << slot;
  expect_tensor(ctx, q, DType::kBF16, 3, op, "q");
  expect_tensor(ctx, out, DType::kBF16, 3, op, "out");
  expect_tensor(ctx, gate.g, DType::kBF16, 2, op, "g");
  expect_tensor(ctx, gate.bias, DType::kBF16, 1, op, "bias");
  BEAM_CHECK(out.shape == q.shape && gate.g.dim(0) == q.dim(0) &&
             gate.g.dim(1) == q.dim(1) * q.dim(2) && gate.bias.dim(0) == q.dim(1))
      << op << ": q " << q.shape.str() << ", out " << out.shape.str() << ", g "
      << gate.g.shape.str() << ", bias " << gate.bias.shape.str();
  switch (ctx.device) {
    case Device::kCpu:
      cpu_has_no_fixed_attention(op);
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::fixed_paged_attention(*ctx.cuda, slot, q, kv, window, out, &gate);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

}  // namespace beam
