// paged_attention / store_kv: validate shapes, dtypes and batch layout, dispatch by device.
#include "kernels/api/attention.h"

#include "kernels/api/checks.h"
#include "kernels/cpu/attention.h"
#if BEAMSERVE_CUDA
#include "kernels/cuda/attention.h"
#endif

namespace beam {

using kernel_checks::cpu_pool;
using kernel_checks::cuda_backend_not_built;
using kernel_checks::expect_tensor;

namespace {

void check_cache(const KernelContext& ctx, const PagedKv& kv, int64_t num_kv_heads,
                 int64_t head_dim, const char* op) {
  expect_tensor(ctx, kv.k, DType::kBF16, 4, op, "kv.k");
  expect_tensor(ctx, kv.v, DType::kBF16, 4, op, "kv.v");
  BEAM_CHECK(kv.v.shape == kv.k.shape && kv.block_size > 0 && kv.k.dim(1) == kv.block_size &&
             kv.k.dim(2) == num_kv_heads && kv.k.dim(3) == head_dim)
      << op << ": cache k " << kv.k.shape.str() << ", v " << kv.v.shape.str() << ", block_size "
      << kv.block_size << ", expected [*, block_size, " << num_kv_heads << ", " << head_dim << "]";
}

}  // namespace

void paged_attention(const KernelContext& ctx, const TensorView& q, const PagedKv& kv,
                     std::span<const AttentionSeq> seqs, int64_t window, const TensorView& out) {
  constexpr const char* op = "paged_attention";
  expect_tensor(ctx, q, DType::kBF16, 3, op, "q");
  expect_tensor(ctx, out, DType::kBF16, 3, op, "out");
  BEAM_CHECK(out.shape == q.shape) << op << ": q " << q.shape.str() << ", out " << out.shape.str();
  const int64_t Nkv = kv.k.rank() == 4 ? kv.k.dim(2) : 0;
  BEAM_CHECK(Nkv > 0 && q.dim(1) % Nkv == 0)
      << op << ": " << q.dim(1) << " query heads over cache " << kv.k.shape.str();
  check_cache(ctx, kv, Nkv, q.dim(2), op);
  BEAM_CHECK(window >= 0) << op << ": window " << window;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const AttentionSeq& s = seqs[i];
    BEAM_CHECK(s.q_begin >= 0 && s.q_count >= 0 && s.q_begin + s.q_count <= q.dim(0) &&
               s.kv_pos0 >= 0 && s.kv_len >= 0)
        << op << ": sequence " << i << " rows " << s.q_begin << "+" << s.q_count << " of "
        << q.dim(0) << ", kv_pos0 " << s.kv_pos0 << ", kv_len " << s.kv_len;
  }
  switch (ctx.device) {
    case Device::kCpu:
      cpu::paged_attention(cpu_pool(ctx, op), q, kv, seqs, window, out);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::paged_attention(*ctx.cuda, q, kv, seqs, window, out,
                            ctx.attention_probs == AttentionProbs::kBf16, /*tensor_maps=*/true,
                            batch_invariant(ctx));
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

void store_kv(const KernelContext& ctx, const TensorView& k, const TensorView& v,
              const TensorView& slots, const PagedKv& kv) {
  constexpr const char* op = "store_kv";
  expect_tensor(ctx, k, DType::kBF16, 3, op, "k");
  expect_tensor(ctx, v, DType::kBF16, 3, op, "v");
  expect_tensor(ctx, slots, DType::kI64, 1, op, "slots");
  BEAM_CHECK(v.shape == k.shape && slots.dim(0) == k.dim(0))
      << op << ": k " << k.shape.str() << ", v " << v.shape.str() << ", slots "
      << slots.shape.str();
  check_cache(ctx, kv, k.dim(1), k.dim(2), op);
  switch (ctx.device) {
    case Device::kCpu:
      cpu::store_kv(cpu_pool(ctx, op), k, v, slots, kv);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::store_kv(*ctx.cuda, k, v, slots, kv);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

}  // namespace beam
