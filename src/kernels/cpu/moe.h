// CPU mixture-of-experts: grouped sigmoid routing and the routed experts (BEAM.md §3.10).
#pragma once

#include "core/thread_pool.h"
#include "kernels/api/moe.h"
#include "kernels/cpu/gemm.h"

namespace beam::cpu {

// Arguments validated by kernels/api/moe.cpp (shapes and dtypes as in that header).
void moe_route(ThreadPool& pool, const TensorView& router_logits, const TensorView& bias,
               const RouterParams& params, const TensorView& ids, const TensorView& weights);
// Tokens t >= active (of ids / weights [T, top_k]) become padding: ids kNoExpert, weights 0.
void mark_padding(int64_t active, const TensorView& ids, const TensorView& weights);
// path: the GEMM path of every expert's GEMMs (kTiles keeps each token's result independent of how
// many tokens share its expert, i.e. of the batch). lora (optional): each expert's rows get
// kernels/cpu/lora.h's deltas (per token, whatever the batch).
void moe_experts(ThreadPool& pool, const TensorView& x, const TensorView& gate_up,
                 const TensorView& down, const TensorView& ids, const TensorView& weights,
                 const TensorView& out, GemmPath path = GemmPath::kAuto,
                 const MoeLora* lora = nullptr);

}  // namespace beam::cpu
