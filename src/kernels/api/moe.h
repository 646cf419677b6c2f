// Mixture-of-experts routing and expert computation (BEAM.md §3.10).
#pragma once

#include "core/status.h"
#include "kernels/api/context.h"
#include "kernels/api/lora.h"

namespace beam {

struct RouterParams {
  int64_t num_groups = 1;       // n_group: experts split into contiguous groups
  int64_t topk_groups = 1;      // topk_group: groups kept
  int64_t top_k = 1;            // num_experts_per_tok
  bool norm_topk_prob = true;   // renormalise: w /= (sum(w) + 1e-20)
  float routed_scaling_factor = 1.0f;
};

// Grouped sigmoid "noaux_tc" selection from fp32 router logits [T, E]:
// score = sigmoid(logit); choice = score + bias; group score = sum of its top-2 choices;
// keep the topk_groups best groups (others excluded); top_k experts by choice among kept ones;
// weight = score (unbiased), renormalised if asked, times routed_scaling_factor.
// bias: [E] f32; ids: [T, top_k] i32 (descending choice); weights: [T, top_k] f32.
void moe_route(const KernelContext& ctx, const TensorView& router_logits, const TensorView& bias,
               const RouterParams& params, const TensorView& ids, const TensorView& weights);

// The expert id of a routed slot that goes to no expert: moe_experts skips it.
constexpr int32_t kNoExpert = -1;

// The router and the routing of one MoE layer: logits = linear(x, router_w) in fp32 (bf16 x
// widened exactly), then moe_route(logits, bias, params). CPU: exactly those two ops. CUDA: one
// split-K kernel for the logits at small T (kernels/cuda/moe.h), fp32 sums in another order (ids
// equal on well-separated logits). x: [T, H] bf16; router_w: [E, H] f32; others as moe_route.
// active: empty (every token is real) or [1] i32 on ctx's device, read when the op runs (a CUDA
// graph replays with the value of the time): tokens t >= active[0] are padding (a decode graph's
// rows beyond its batch) and get ids kNoExpert and weights 0, so moe_experts does no work for
// them; the real tokens' ids and weights do not depend on it.
void moe_router_route(const KernelContext& ctx, const TensorView& x, const TensorView& router_w,
                      const TensorView& bias, const RouterParams& params, const TensorView& ids,
                      const TensorView& weights, const TensorView& active = TensorView{});

// Which routed-expert matrix a tensor holds.
enum class ExpertMatrix {
  kGateUp,  // [E, 2 * Im, H]: gate rows then up rows
  kDown,    // [E, H, Im]
};

// Puts routed-expert weights, in place, into the layout moe_experts reads on ctx's device: on the
// CPU the row-major one they come in (nothing to do); on CUDA, when the hidden and expert widths
// are multiples of 64, packed k64 tiles (kernels/cuda/moe_packed.cuh), else row-major too. Call
// it once on each expert tensor after it reaches the device (upload_weights and the synthetic
// weights do); moe_experts on CUDA reads packable widths as packed. w: bf16 on ctx's device,
// [E, 2 * Im, H] for kGateUp, [E, H, Im] for kDown. Errors: a temporary the device cannot hold.
Status pack_expert_weights(const KernelContext& ctx, ExpertMatrix which, const TensorView& w);

// Rows [first, first + count) of expert `expert`'s matrix in w (pack_expert_weights' layout on
// ctx's device; shapes as it takes them) as row-major bf16 bits in host memory `out` (count x
// w.dim(2)): a copy on the CPU, the packed rows gathered back on CUDA. Reads, never writes, w.
void read_expert_rows(const KernelContext& ctx, ExpertMatrix which, const TensorView& w,
                      int64_t expert, int64_t first, int64_t count, uint16_t* out);

// One routed-expert matrix's per-request LoRA factors: expert e's LoraStack (kernels/api/lora.h)
// for every slot is of_expert(e).
struct ExpertLoraStack {
  TensorView a;      // [E, S, r, in] bf16
  TensorView b;      // [E, S, out, r] bf16
  TensorView scale;  // [S] f32 (one scale per slot for all experts: lora_alpha / r or / √r)
  LoraStack of_expert(int64_t e) const;
};

// Per-request LoRA on the routed experts (vLLM's fused-MoE LoRA): a routed row (t, k) of expert e
// whose token has slot s != kNoLoraSlot gets lora_add's delta of slot s of expert e on each expert
// matrix: gate and up (inputs x[t]) on the rounded gate / up outputs before SwiGLU, down (input the
// rounded activation) on the rounded expert output before the combine. A row with kNoLoraSlot
// keeps the bits it has without LoRA.
struct MoeLora {
  ExpertLoraStack gate;  // in H, out Im
  ExpertLoraStack up;    // in H, out Im
  ExpertLoraStack down;  // in Im, out H
  TensorView slots;      // [T] i32 in [kNoLoraSlot, S), read when the op runs
};

// Routed experts with an fp32 combine: for each token t,
//   out[t] = bf16( Σ_k weights[t,k] * f32( down_e( swiglu( gate_up_e(x[t]) ) ) ) ), e = ids[t,k]
// where every GEMM output is rounded to bf16 as in the dense MLP.
// x: [T, H] bf16; gate_up: [E, 2*Im, H] bf16 (gate rows then up rows); down: [E, H, Im] bf16;
// ids, weights: [T, k] i32 / f32; out: [T, H] bf16, or f32 for the sum unrounded (a
// tensor-parallel rank's partial over its experts). The expert weights in
// pack_expert_weights' layout for ctx's device. A slot with id kNoExpert adds nothing (a token with
// no expert gets 0); any other id outside [0, E) aborts (CPU) or traps the kernel (CUDA). lora
// (optional): the experts' per-request LoRA above (CUDA: the same roundings, fp32 sums in another
// order).
void moe_experts(const KernelContext& ctx, const TensorView& x, const TensorView& gate_up,
                 const TensorView& down, const TensorView& ids, const TensorView& weights,
                 const TensorView& out, const MoeLora* lora = nullptr);

}  // namespace beam
