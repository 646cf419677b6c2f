// Causal GQA attention over a paged KV cache (BEAM.md §3.3, §3.6), fp32 softmax and accumulation.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/api/context.h"

namespace beam {

// One pool's KV storage for one layer. k, v: [num_blocks, block_size, Nkv, D] bf16.
struct PagedKv {
  TensorView k;
  TensorView v;
  int64_t block_size = 0;
};

// One sequence's part of a batch. Query row i (0 <= i < q_count) is batch row q_begin + i and
// sits at absolute position q_pos0 + i. Keys are the sequence's logical KV slots [0, kv_len)
// (already written, the new tokens included); slot j sits at absolute position kv_pos0 + j and
// lives in physical block block_table[j / block_size] at offset j % block_size. Entries of
// block_table for blocks no query can see (slid out of the window) may be -1; they are never read.
// Rows [0, prompt_rows) are prompt tokens, the others generated or drafted ones: a batch-invariant
// CUDA context (kernels/api/context.h) runs prompt rows on the prefill kernel and the others on
// the decode kernel whatever the chunk's size, so a token's bits never depend on how its request
// was chunked or batched. Other contexts ignore it.
struct AttentionSeq {
  static constexpr int64_t kEveryRow = INT64_MAX;
  int64_t q_begin = 0;
  int64_t q_count = 0;
  int64_t q_pos0 = 0;
  int64_t kv_pos0 = 0;
  int64_t kv_len = 0;
  std::span<const int32_t> block_table;
  int64_t prompt_rows = kEveryRow;
};

// q: [T, Nq, D] bf16, out: [T, Nq, D] bf16. Query at position p sees keys at positions p' with
// p' <= p and, when window > 0, p - p' < window. scale = 1/sqrt(D). Head h reads KV head
// h / (Nq / Nkv). ctx.attention_probs: how P enters P·V (kernels/api/context.h). On the GPU the
// op may read a sequence's keys before its first query position (kv slots below q_pos0 -
// kv_pos0) while the kernel queued right before it still runs: that kernel may write only the
// query positions' keys (as the step's KV store does), never older ones.
void paged_attention(const KernelContext& ctx, const TensorView& q, const PagedKv& kv,
                     std::span<const AttentionSeq> seqs, int64_t window, const TensorView& out);

// Writes k, v rows [T, Nkv, D] bf16 into the cache; slots: [T] i64 physical slot
// (block * block_size + offset), or -1 to skip the row.
void store_kv(const KernelContext& ctx, const TensorView& k, const TensorView& v,
              const TensorView& slots, const PagedKv& kv);

}  // namespace beam
