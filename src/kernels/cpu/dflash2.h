// CPU DFlash2 drafter ops (the reference of the CUDA ones): the two-tap convolution, the context
// store, the block attention over a paged context and the selector's top-k and greedy walk.
#pragma once

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/api/dflash2.h"

namespace beam::cpu {

// Views validated by kernels/api/dflash2.cpp (shapes and dtypes as in that header).
void dflash2_conv(ThreadPool& pool, const TensorView& base, const TensorView& d, int64_t side,
                  int64_t group_size, int64_t block_size, const TensorView& x,
                  const TensorView& out);
void dflash2_store_context(const TensorView& k, const TensorView& v, const TensorView& slots,
                           const TensorView& positions, const TensorView& keys,
                           const TensorView& values, const TensorView& slot_positions);
void dflash2_block_attention(ThreadPool& pool, const TensorView& q, const TensorView& k,
                             const TensorView& v, const DFlash2ContextView& context,
                             const TensorView& out);
void dflash2_select(ThreadPool& pool, const TensorView& u, const TensorView& hp,
                    const TensorView& predecessor, const TensorView& successor,
                    const TensorView& anchors, const TensorView& candidates,
                    const TensorView& scores, const TensorView& drafts);

}  // namespace beam::cpu
