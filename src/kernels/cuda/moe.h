// CUDA mixture-of-experts ops (BEAM.md §3.10): grouped sigmoid routing and the routed experts,
// matching kernels/cpu/moe_route.cpp and moe_experts.cpp.
#pragma once

#include "core/tensor.h"
#include "kernels/api/moe.h"
#include "kernels/cuda/cuda_context.h"

namespace beam::cuda {

// Views validated by kernels/api/moe.cpp (shapes and dtypes as in that header), all on the
// device; both ops are queued on ctx.stream without host synchronisation or allocation (except
// moe_experts' scratch growth, below), so CUDA graphs can capture them.

// ids identical to the CPU op's and weights bit-identical (same fp32 operations in the same order).
// One block of 256 threads per token (an expert per thread): limits E <= 256, num_groups <= 32,
// top_k <= 32. A NaN choice is not diagnosed (the CPU aborts): it ranks as -inf.
void moe_route(CudaContext& ctx, const TensorView& router_logits, const TensorView& bias,
               const RouterParams& params, const TensorView& ids, const TensorView& weights);

// Tokens up to which moe_router_route computes the router logits with its own split-K kernel
// (above: three bf16 cuBLASLt GEMMs on the exactly split weights into ctx.moe_router, or
// linear()'s fp32 GEMM for odd widths, then moe_route): every decode graph bucket, one launch in
// place of the split path's nine (H200 run 167: the decode layer even at batch 129, 0.1-0.5%
// faster at 200 / 256).
constexpr int64_t kMoeRouterFusedMaxTokens = 256;

// The fp32 router GEMM (bf16 x widened exactly, exact products, fp32 sums in another order than
// the CPU's) and moe_route's grouped top-k on its logits; shapes as in kernels/api/moe.h. Up to
// kMoeRouterFusedMaxTokens tokens one kernel does both: tensor-core split-K partials (each fp32
// weight split exactly into three bf16 terms; per k16 step the tensor core sums the products from
// zero, the steps, warps and splits are added in fixed fp32 order), then the last
// routers = min(T, grid, SMs) blocks fold and route tokens r, r + routers, ... (for Beam one each
// up to T = 128, two at 256); a token's logits do not depend on T or on its row. It is
// launched as a programmatic dependent (loads the weights while x's producer finishes). Above,
// the same split as three bf16 tensor-core GEMMs (H % 8 == 0, 8-byte aligned weights; else
// linear()'s fp32 GEMM), then moe_route over their three partials. Partials and logits live in
// ctx.moe_router, reserved on the first call (more only for larger T: not during graph capture).
// Padding tokens (t >= active[0] when active is given) skip the routing: ids kNoExpert, weights 0.
// invariant (a batch-invariant context): more tokens run the fused kernel on slices of
// kMoeRouterFusedMaxTokens (active counting the call's tokens), so every token's logits are those
// of the fused kernel.
void moe_router_route(CudaContext& ctx, const TensorView& x, const TensorView& router_w,
                      const TensorView& bias, const RouterParams& params, const TensorView& ids,
                      const TensorView& weights, const TensorView& active, bool invariant = false);

// kernels/api/moe.h's pack_expert_weights (w validated there): in place, through a temporary of
// up to ~256 MB of experts; waits for the stream before returning.
Status pack_expert_weights(CudaContext& ctx, ExpertMatrix which, const TensorView& w);
// kernels/api/moe.h's read_expert_rows (arguments checked there): the expert's block copied to
// the host, its rows gathered from the packed layout (or copied when the widths are not packed).
void read_expert_rows(CudaContext& ctx, ExpertMatrix which, const TensorView& w, int64_t expert,
                      int64_t first, int64_t count, uint16_t* out);

// How moe_experts computes the experts; both give the CPU's rounding points, differ from it (and
// from each other) only by fp32 summation order, and are run-to-run deterministic.
enum class MoeExpertsPath {
  kAuto,  // kSmallBatch when T * top_k <= kMoeSmallBatchMaxRows and the shapes fit it, else
          // kGrouped
  // Grouped wgmma GEMMs over expert-row tiles of up to 64 rows when the experts average at most
  // kMoeShortTilesMaxAverageRows rows (decode batches past kSmallBatch), of up to 128 rows against
  // two column bands when they average at most kMoeWideTilesMaxAverageRows (prefill chunks), else
  // of up to 256 (long prefills).
  kGrouped,
  kSmallBatch,         // weight streaming: each selected expert read once over all SMs (decode)
  kGroupedCpAsync,     // kGrouped on its cp.async GEMM kernel only (the fallback when the driver
                       // refuses the TMA kernel's tensor maps; tests)
  kGroupedShortTiles,  // kGrouped with 64-row tiles whatever the rows (tests, benchmarks)
  kGroupedLongTiles,   // kGrouped with 256-row tiles whatever the rows (tests, benchmarks)
  kGroupedWideTiles,   // kGrouped with 128-row two-band tiles whatever the rows (tests, benchmarks)
};
// Routed rows per expert, on average, up to which the grouped path takes tiles of up to 64 rows
// on its TMA kernel's 9-stage ring (144 KB of weights in flight an SM; the 256-row tiles leave
// room for 4 stages, 64 KB, too few to stream the weights at HBM rate when each expert's weights
// meet only ~16 rows). An expert with more rows takes several tiles, which re-read its weights
// from L2 back to back. H200 run 185, Beam's experts, against 256-row tiles: T = 320 / 512 / 768 /
// 1024 (10-32 rows an expert) 1.126 / 1.132 / 1.170 / 1.180 -> 1.023 / 1.031 / 1.077 / 1.079x of
// the floor, decode layer at batch 512 1.249 -> 1.172x; T = 1536 / 2048 (48 / 64 rows) 1.246 /
// 1.280 -> 1.300 / 1.466x.
constexpr int64_t kMoeShortTilesMaxAverageRows = 32;
// Routed rows per expert, on average, up to which the grouped path takes tiles of up to 128 rows
// against two column bands (256 weight rows) rather than 256 rows against one: each band reads the
// tile's grouped rows again from L2, which at ~64 rows an expert loads L2 as much as the weights
// streaming through it (run 241 at T = 2048: L2 95% busy, DRAM 81%). H200 runs 242-243, Beam's
// experts in a graph, model / skewed routing: T = 1536 / 2048 / 2560 / 3072 / 4096 (48-128 rows)
// 1.20 / 1.22 / 1.26 / 1.32 / 1.46x -> 1.07 / 1.10 / 1.15 / 1.25 / 1.44x of the floor (skewed
// 5-10% faster); T = 5120 / 6144 (160 / 192 rows) even, skewed 3% faster; T = 8192 (256 rows)
// 1% slower.
constexpr int64_t kMoeWideTilesMaxAverageRows = 192;
// Routed rows (T * top_k) up to which kAuto takes the small-batch path: T <= 256 at top-8, every
// decode graph bucket. By design its time is the HBM floor of the experts the batch touches: every
// selected expert is read once, in equal shares per SM whatever the row counts, and the rows of an
// expert ride on the same weight fragments (an expert with more rows than a pass, 8 or 16,
// re-reads each tile from L2, right after, per further pass; such experts' units weigh 7/4
// (gate_up) and 10/4 (down) in the shares, so skewed routing keeps ~1.05x of the floor: H200 run
// 102, a 46-row expert at T = 128). The grouped path's 64 x 128 tiles are sized for prefill: at
// decode they hold ~1-4 rows of 64 (H200, 2026-11-30: 8.8 ms at T = 128, 1.9x the floor; at T =
// 256 its experts stream 15-23% slower than this path's, run 165). Past 1,024 rows the kernels'
// 2,048-slot tables fit a 196 KB shared-memory carveout only with the sort keys in the ring's
// bytes, and the 60 KB of L1 that leaves (28 KB at 200 KB) likely catch the wide kernels' small
// register spills (run 175: the decode layer at T = 192 1.14 -> 1.06x of the floor, at T = 256 2%
// faster than the grouped path, which run 174 had found 8% ahead with the larger tables). From
// 257 rows the last 10% of the units are drawn at run time (the SMs stream at different speeds;
// run 179: the MoE layer at T = 256 1.16 -> 1.08x of its floor, T = 192 1.08 -> 1.04x).
// Prefill chunks beyond take the grouped path.
constexpr int64_t kMoeSmallBatchMaxRows = 2048;
// Routed rows the small-batch path accepts at all (forcing it beyond is a checked error).
constexpr int64_t kMoeSmallBatchRowLimit = 2048;
// Hidden and expert widths the small-batch path accepts: packed ones (multiples of 64) up to this
// (Beam: 5120 and 2560; a warp's share of K stays in registers), 16-byte aligned x and weights.
constexpr int64_t kMoeSmallBatchMaxWidth = 5120;
// Whether the small-batch path takes these widths, expert count and pointers (rows aside).
bool moe_small_batch_supports(const TensorView& x, const TensorView& gate_up,
                              const TensorView& down);

// Routed experts, SwiGLU, fp32 combine per token in k order. gate_up and down are packed when
// H and I are multiples of 64 (pack_expert_weights; moe_packed.cuh's packed_widths), else
// row-major. Scratch lives in ctx.moe and is
// sized for T * top_k routed rows: the first call at a new largest T (or width) allocates, which
// must not happen during graph capture (checked). Launch grids depend on T, top_k and the widths
// only, never on the routing. Slots with id kNoExpert take no rows (their work is skipped, not
// done on a dummy); any other expert id outside [0, E) traps the kernel (the stream reports the
// error), as the CPU op aborts. The small-batch path chains its launches (gate_up, down,
// combine) by programmatic dependent launch, also inside CUDA graphs, the first one on the kernel
// queued before it (it waits for that kernel's completion before reading anything). `path` is for
// tests and benchmarks; the api op uses kAuto, or kGrouped in a batch-invariant context (its
// three tile shapes give the same bits, the small-batch path other ones). lora (optional): per-request LoRA (moe_lora.cuh:
// shrink and expand launches around the GEMMs, the gate / up deltas added in the epilogue of the
// gate_up kernels' LoRA instantiations).
void moe_experts(CudaContext& ctx, const TensorView& x, const TensorView& gate_up,
                 const TensorView& down, const TensorView& ids, const TensorView& weights,
                 const TensorView& out, MoeExpertsPath path = MoeExpertsPath::kAuto,
                 const MoeLora* lora = nullptr);

}  // namespace beam::cuda
