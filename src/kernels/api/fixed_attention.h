// Paged attention with a fixed launch configuration, for CUDA graphs of decode steps
// (model/beam/decode_graphs.h). The host plans a batch into a fixed slot before the graph runs;
// the captured launch reads the plan from device memory at fixed addresses, so a replay serves
// any batch the slot holds. Results are bit-identical to paged_attention (kernels/api/attention.h)
// on every row a sequence covers, and every other row of the output is written with zeros, so
// the caller needs no zero fill for the padding rows of a graph's batch.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/api/attention.h"

namespace beam {

constexpr int kNumFixedAttentionSlots = 2;  // one per KV pool: 0 full, 1 sliding

// Plans seqs (same contract as paged_attention; q has num_rows rows of num_heads x head_dim) into
// slot `slot` of ctx and queues the plan's upload on ctx's stream. Must not run inside a graph
// capture; when the slot has to grow, it waits for queued work and graph_fingerprint(ctx)
// (kernels/api/device_memory.h) changes. CUDA only (aborts on the CPU); at most 16 query heads
// per KV head.
void plan_fixed_attention(const KernelContext& ctx, int slot, const PagedKv& kv, int64_t num_rows,
                          int64_t num_heads, int64_t head_dim, std::span<const AttentionSeq> seqs,
                          int64_t window);

// paged_attention over the batch last planned into `slot` (same kv geometry and window); rows of
// out that no planned sequence covers (padding rows, and rows at or past the plan's num_rows) are
// set to zero. Launch configuration independent of the batch. CUDA only (aborts on the CPU).
void fixed_paged_attention(const KernelContext& ctx, int slot, const TensorView& q,
                           const PagedKv& kv, int64_t window, const TensorView& out);

// The sigmoid output gate of an attention layer (output_gate, kernels/api/activation.h):
// g [T, Nq * D] bf16 (T = q's rows), bias [Nq] bf16.
struct AttentionGate {
  TensorView g, bias;
};

// fixed_paged_attention with output_gate(out as [T, Nq * D], gate.g, gate.bias) applied as each
// covered row is written (one launch): bit-identical to the two ops on every covered row; rows no
// planned sequence covers are zero (not gated). CUDA only (aborts on the CPU).
void fixed_paged_attention_gated(const KernelContext& ctx, int slot, const TensorView& q,
                                 const PagedKv& kv, int64_t window, const AttentionGate& gate,
                                 const TensorView& out);

}  // namespace beam
