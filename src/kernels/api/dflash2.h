// The DFlash2 drafter's own ops (docs/dflash2.md): the two-tap dynamic convolution, the context
// store, the non-causal block attention over a paged context, and the selector's top-k and greedy
// walk. The drafter's GEMMs, norms, RoPE and SwiGLU are the target's ops (gemm.h, norm.h, ...).
#pragma once

#include <cstdint>

#include "kernels/api/context.h"

namespace beam {

// Two-tap dynamic convolution of one side (docs/dflash2.md step 4). Rows come in blocks of
// block_size; row t of a block: y_t[c] = bf16(k0 * x_t[c] + k1 * x_{t-1}[c]) with
// k_j = f32(base[side, j, c]) + f32(d[t, side * 2 + j, c / group_size]) (fp32), the x_{t-1} term
// absent at a block's first row. base: [2, 2, H] bf16; d: [N, 4 * H / group_size] bf16 (viewed
// [N, side, tap, group]); x, out: [N, H] bf16 with N a multiple of block_size (out may alias x).
void dflash2_conv(const KernelContext& ctx, const TensorView& base, const TensorView& d,
                  int64_t side, int64_t group_size, int64_t block_size, const TensorView& x,
                  const TensorView& out);

// A drafter context pool's layer as the block attention reads it (model/dflash2's
// DFlash2ContextPool): K and V rows in pages of page_size slots. Block b's page table is
// pages[table_offsets[b] .. + table_lengths[b]); position p lives in page
// table[(p / page_size) % ring_pages] (table[p / page_size] when ring_pages is 0), slot
// page * page_size + p % page_size, and is held when that entry is in the table, not -1, and
// slot_positions[slot] == p.
struct DFlash2ContextView {
  TensorView keys, values;     // [slots, Nkv, D] bf16: one layer's
  TensorView slot_positions;   // [slots] i64: the position each slot holds, -1 when empty
  TensorView pages;            // [n] i32: the blocks' page tables back to back, -1: no page
  TensorView table_offsets;    // [S] i32
  TensorView table_lengths;    // [S] i32
  TensorView block_positions;  // [S] i64: each block's anchor position p
  int64_t page_size = 0;
  int64_t ring_pages = 0;  // 0: no ring
  int64_t window = 0;      // sliding_window (0: none)
};

// Writes one layer's context rows: keys[slots[t]] = k[t], values[slots[t]] = v[t], and with
// positions (not empty) slot_positions[slots[t]] = positions[t]. k, v: [T, Nkv * D] bf16; slots,
// positions: [T] i64; keys, values: [n_slots, Nkv * D] bf16; slot_positions: [n_slots] i64. A slot
// outside [0, n_slots) is a caller bug.
void dflash2_store_context(const KernelContext& ctx, const TensorView& k, const TensorView& v,
                           const TensorView& slots, const TensorView& positions,
                           const TensorView& keys, const TensorView& values,
                           const TensorView& slot_positions);

// The block attention (docs/dflash2.md step 4): query row b * B + t (position p_b + t) of head h
// attends, GQA (KV head h / (Nq / Nkv)), to the held context positions in
// [max(0, p_b + t - window + 1), p_b) (from 0 without a window) and to all B rows of its block
// (non-causal); scores fp32(q · k) * fp32(1 / sqrt(D)), fp32 softmax, out = bf16(Σ p · v).
// q, out: [S * B, Nq, D] bf16; k, v: [S * B, Nkv, D] bf16 (the block's rows, after RoPE).
void dflash2_block_attention(const KernelContext& ctx, const TensorView& q, const TensorView& k,
                             const TensorView& v, const DFlash2ContextView& context,
                             const TensorView& out);

// The selector (docs/dflash2.md step 6) for S blocks of J = R / S draft rows each: per row the
// K = candidates.dim(1) largest logits (descending, the lower id first on ties) into candidates;
// then per block from prev = anchors[b], for j = 0 .. J - 1 (row r = b * J + j):
// gate = bf16(f32(predecessor[prev]) * f32(hp[r])),
// scores[r, i] = u[r, cand_i] + Σ_k fp32(gate[k] * successor[cand_i, k]) (fp32 from 0, k
// ascending), drafts[r] = prev = the candidate with the largest score (the first on ties).
// u: [R, V] f32; hp: [R, rank] bf16; predecessor, successor: [V, rank] bf16; anchors: [S] i32;
// candidates: [R, K] i32; scores: [R, K] f32; drafts: [R] i32. K <= 64.
void dflash2_select(const KernelContext& ctx, const TensorView& u, const TensorView& hp,
                    const TensorView& predecessor, const TensorView& successor,
                    const TensorView& anchors, const TensorView& candidates,
                    const TensorView& scores, const TensorView& drafts);

}  // namespace beam
