// CUDA DFlash2 drafter ops: the two-tap convolution, the context store, the block attention over
// a paged context and the selector (top-k, then the greedy walk).
#pragma once

#include "core/tensor.h"
#include "kernels/api/dflash2.h"
#include "kernels/cuda/cuda_context.h"

namespace beam::cuda {

// Views validated by kernels/api/dflash2.cpp (shapes and dtypes as in that header), all on the
// device; every op is queued on ctx.stream.
void dflash2_conv(CudaContext& ctx, const TensorView& base, const TensorView& d, int64_t side,
                  int64_t group_size, int64_t block_size, const TensorView& x,
                  const TensorView& out);
void dflash2_store_context(CudaContext& ctx, const TensorView& k, const TensorView& v,
                           const TensorView& slots, const TensorView& positions,
                           const TensorView& keys, const TensorView& values,
                           const TensorView& slot_positions);
void dflash2_block_attention(CudaContext& ctx, const TensorView& q, const TensorView& k,
                             const TensorView& v, const DFlash2ContextView& context,
                             const TensorView& out);
void dflash2_select(CudaContext& ctx, const TensorView& u, const TensorView& hp,
                    const TensorView& predecessor, const TensorView& successor,
                    const TensorView& anchors, const TensorView& candidates,
                    const TensorView& scores, const TensorView& drafts);

}  // namespace beam::cuda
