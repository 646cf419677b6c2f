// CUDA paged attention and KV-cache write (kernels/api/attention.h on the GPU).
#pragma once

#include <cstdint>
#include <span>

#include "kernels/api/attention.h"
#include "kernels/api/fixed_attention.h"
#include "kernels/cuda/cuda_context.h"

namespace beam::cuda {

// Arguments validated by kernels/api/attention.cpp; q, out and the cache in device memory, seqs
// (and their block tables) in host memory, staged to the device inside the call. D = 64, 128
// or 256 and at most 64 query heads per KV head (abort otherwise). Rows of out that no sequence
// covers are left untouched. bf16_p: the prefill kernel rounds P to bf16 before P·V
// (AttentionProbs::kBf16). tensor_maps false: the prefill kernel copies every Q, K and V row by
// cp.async and the threads store every out row, as when the driver refuses its TMA maps (tests;
// the same bits). invariant: each sequence's prompt rows (AttentionSeq::prompt_rows) go to the
// prefill kernel whatever their count (where it serves the geometry), its other rows to the
// decode kernel; otherwise sequences of at least kPrefillMinRows rows go to the prefill kernel.
void paged_attention(CudaContext& ctx, const TensorView& q, const PagedKv& kv,
                     std::span<const AttentionSeq> seqs, int64_t window, const TensorView& out,
                     bool bf16_p, bool tensor_maps = true, bool invariant = false);

// Fixed plans for CUDA graphs (kernels/api/fixed_attention.h, validated there). plan_ plans every
// row of seqs for the decode kernel (at most 16 query heads per KV head), writes the plan and the
// list of uncovered rows into fixed slot `slot` (grown outside any capture; growth bumps
// ctx.attention.fixed_generation) and queues its upload. fixed_ launches over a grid that depends
// only on the geometry and the SM count, reading the plan from the device, and zeroes the rows of
// out no sequence covers; with `gate`, each covered row is gated as it is written
// (fixed_paged_attention_gated).
void plan_fixed_attention(CudaContext& ctx, int slot, const PagedKv& kv, int64_t num_rows,
                          int64_t num_heads, int64_t head_dim, std::span<const AttentionSeq> seqs,
                          int64_t window);
void fixed_paged_attention(CudaContext& ctx, int slot, const TensorView& q, const PagedKv& kv,
                           int64_t window, const TensorView& out,
                           const AttentionGate* gate = nullptr);

// k, v: [T, Nkv, D] bf16 and slots [T] i64 in device memory. Rows whose slot is -1 (or outside
// the pool, which the device cannot report) are skipped.
void store_kv(CudaContext& ctx, const TensorView& k, const TensorView& v, const TensorView& slots,
              const PagedKv& kv);

}  // namespace beam::cuda
