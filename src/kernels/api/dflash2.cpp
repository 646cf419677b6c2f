// DFlash2 drafter ops: validate shapes and dtypes, dispatch by device.
#include "kernels/api/dflash2.h"

#include "kernels/api/checks.h"
#include "kernels/cpu/dflash2.h"
#if BEAMSERVE_CUDA
#include "kernels/cuda/dflash2.h"
#endif

namespace beam {

using kernel_checks::cpu_pool;
using kernel_checks::cuda_backend_not_built;
using kernel_checks::expect_tensor;

void dflash2_conv(const KernelContext& ctx, const TensorView& base, const TensorView& d,
                  int64_t side, int64_t group_size, int64_t block_size, const TensorView& x,
                  const TensorView& out) {
  constexpr const char* op = "dflash2_conv";
  expect_tensor(ctx, base, DType::kBF16, 3, op, "base");
  expect_tensor(ctx, d, DType::kBF16, 2, op, "d");
  expect_tensor(ctx, x, DType::kBF16, 2, op, "x");
  expect_tensor(ctx, out, DType::kBF16, 2, op, "out");
  const int64_t N = x.dim(0), H = x.dim(1);
  BEAM_CHECK((side == 0 || side == 1) && group_size > 0 && H % group_size == 0 && block_size > 0 &&
             N % block_size == 0 && out.shape == x.shape && base.shape == Shape({2, 2, H}) &&
             d.shape == Shape({N, 4 * H / group_size}))
      << op << ": base " << base.shape.str() << ", d " << d.shape.str() << ", side " << side
      << ", group " << group_size << ", block " << block_size << ", x " << x.shape.str() << ", out "
      << out.shape.str();
  if (N == 0) return;
  switch (ctx.device) {
    case Device::kCpu:
      cpu::dflash2_conv(cpu_pool(ctx, op), base, d, side, group_size, block_size, x, out);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::dflash2_conv(*ctx.cuda, base, d, side, group_size, block_size, x, out);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

void dflash2_store_context(const KernelContext& ctx, const TensorView& k, const TensorView& v,
                           const TensorView& slots, const TensorView& positions,
                           const TensorView& keys, const TensorView& values,
                           const TensorView& slot_positions) {
  constexpr const char* op = "dflash2_store_context";
  expect_tensor(ctx, k, DType::kBF16, 2, op, "k");
  expect_tensor(ctx, v, DType::kBF16, 2, op, "v");
  expect_tensor(ctx, slots, DType::kI64, 1, op, "slots");
  expect_tensor(ctx, positions, DType::kI64, 1, op, "positions");
  expect_tensor(ctx, keys, DType::kBF16, 2, op, "keys");
  expect_tensor(ctx, values, DType::kBF16, 2, op, "values");
  expect_tensor(ctx, slot_positions, DType::kI64, 1, op, "slot_positions");
  const int64_t T = k.dim(0);
  BEAM_CHECK(v.shape == k.shape && slots.dim(0) == T &&
             (positions.numel() == 0 || positions.dim(0) == T) && values.shape == keys.shape &&
             keys.dim(1) == k.dim(1) && slot_positions.dim(0) == keys.dim(0))
      << op << ": k " << k.shape.str() << ", v " << v.shape.str() << ", slots " << slots.shape.str()
      << ", positions " << positions.shape.str() << ", keys " << keys.shape.str() << ", values "
      << values.shape.str() << ", slot_positions " << slot_positions.shape.str();
  if (T == 0) return;
  switch (ctx.device) {
    case Device::kCpu:
      cpu::dflash2_store_context(k, v, slots, positions, keys, values, slot_positions);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::dflash2_store_context(*ctx.cuda, k, v, slots, positions, keys, values, slot_positions);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

void dflash2_block_attention(const KernelContext& ctx, const TensorView& q, const TensorView& k,
                             const TensorView& v, const DFlash2ContextView& context,
                             const TensorView& out) {
  constexpr const char* op = "dflash2_block_attention";
  expect_tensor(ctx, q, DType::kBF16, 3, op, "q");
  expect_tensor(ctx, k, DType::kBF16, 3, op, "k");
  expect_tensor(ctx, v, DType::kBF16, 3, op, "v");
  expect_tensor(ctx, out, DType::kBF16, 3, op, "out");
  expect_tensor(ctx, context.keys, DType::kBF16, 3, op, "context.keys");
  expect_tensor(ctx, context.values, DType::kBF16, 3, op, "context.values");
  expect_tensor(ctx, context.slot_positions, DType::kI64, 1, op, "context.slot_positions");
  expect_tensor(ctx, context.pages, DType::kI32, 1, op, "context.pages");
  expect_tensor(ctx, context.table_offsets, DType::kI32, 1, op, "context.table_offsets");
  expect_tensor(ctx, context.table_lengths, DType::kI32, 1, op, "context.table_lengths");
  expect_tensor(ctx, context.block_positions, DType::kI64, 1, op, "context.block_positions");
  const int64_t N = q.dim(0), Nq = q.dim(1), D = q.dim(2), Nkv = k.dim(1);
  const int64_t S = context.block_positions.dim(0);
  BEAM_CHECK(S > 0 && N % S == 0 && out.shape == q.shape && v.shape == k.shape && k.dim(0) == N &&
             k.dim(2) == D && Nkv > 0 && Nq % Nkv == 0 &&
             context.keys.shape == context.values.shape && context.keys.dim(1) == Nkv &&
             context.keys.dim(2) == D && context.slot_positions.dim(0) == context.keys.dim(0) &&
             context.table_offsets.dim(0) == S && context.table_lengths.dim(0) == S &&
             context.page_size > 0 && context.ring_pages >= 0 && context.window >= 0)
      << op << ": q " << q.shape.str() << ", k " << k.shape.str() << ", v " << v.shape.str()
      << ", out " << out.shape.str() << ", context keys " << context.keys.shape.str() << ", " << S
      << " blocks, page size " << context.page_size << ", ring " << context.ring_pages
      << ", window " << context.window;
  switch (ctx.device) {
    case Device::kCpu:
      cpu::dflash2_block_attention(cpu_pool(ctx, op), q, k, v, context, out);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::dflash2_block_attention(*ctx.cuda, q, k, v, context, out);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

void dflash2_select(const KernelContext& ctx, const TensorView& u, const TensorView& hp,
                    const TensorView& predecessor, const TensorView& successor,
                    const TensorView& anchors, const TensorView& candidates,
                    const TensorView& scores, const TensorView& drafts) {
  constexpr const char* op = "dflash2_select";
  expect_tensor(ctx, u, DType::kF32, 2, op, "u");
  expect_tensor(ctx, hp, DType::kBF16, 2, op, "hp");
  expect_tensor(ctx, predecessor, DType::kBF16, 2, op, "predecessor");
  expect_tensor(ctx, successor, DType::kBF16, 2, op, "successor");
  expect_tensor(ctx, anchors, DType::kI32, 1, op, "anchors");
  expect_tensor(ctx, candidates, DType::kI32, 2, op, "candidates");
  expect_tensor(ctx, scores, DType::kF32, 2, op, "scores");
  expect_tensor(ctx, drafts, DType::kI32, 1, op, "drafts");
  const int64_t R = u.dim(0), V = u.dim(1), S = anchors.dim(0), K = candidates.dim(1);
  BEAM_CHECK(S > 0 && R % S == 0 && hp.dim(0) == R && predecessor.shape == successor.shape &&
             predecessor.dim(0) == V && predecessor.dim(1) == hp.dim(1) && candidates.dim(0) == R &&
             K > 0 && K <= 64 && K <= V && scores.shape == candidates.shape && drafts.dim(0) == R)
      << op << ": u " << u.shape.str() << ", hp " << hp.shape.str() << ", codebooks "
      << predecessor.shape.str() << " / " << successor.shape.str() << ", anchors "
      << anchors.shape.str() << ", candidates " << candidates.shape.str() << ", scores "
      << scores.shape.str() << ", drafts " << drafts.shape.str();
  switch (ctx.device) {
    case Device::kCpu:
      cpu::dflash2_select(cpu_pool(ctx, op), u, hp, predecessor, successor, anchors, candidates,
                          scores, drafts);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::dflash2_select(*ctx.cuda, u, hp, predecessor, successor, anchors, candidates, scores,
                           drafts);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

}  // namespace beam
