// moe_route / moe_router_route / pack_expert_weights / moe_experts: validate shapes, dtypes and
// router parameters, dispatch by device.
#include "kernels/api/moe.h"

#include <algorithm>

#include "kernels/api/checks.h"
#include "kernels/api/gemm.h"
#include "kernels/cpu/moe.h"
#if BEAMSERVE_CUDA
#include "kernels/cuda/moe.h"
#endif

namespace beam {

using kernel_checks::cpu_pool;
using kernel_checks::cuda_backend_not_built;
using kernel_checks::expect_tensor;

namespace {

// Routing checks for T tokens over E experts: bias, ids, weights and the router parameters.
void check_routing(const KernelContext& ctx, const char* op, int64_t T, int64_t E,
                   const TensorView& bias, const RouterParams& params, const TensorView& ids,
                   const TensorView& weights) {
  expect_tensor(ctx, bias, DType::kF32, 1, op, "bias");
  expect_tensor(ctx, ids, DType::kI32, 2, op, "ids");
  expect_tensor(ctx, weights, DType::kF32, 2, op, "weights");
  BEAM_CHECK(bias.dim(0) == E && ids.dim(0) == T && ids.dim(1) == params.top_k &&
             weights.shape == ids.shape)
      << op << ": " << T << " tokens, " << E << " experts, bias " << bias.shape.str() << ", ids "
      << ids.shape.str() << ", weights " << weights.shape.str() << ", top_k " << params.top_k;
  BEAM_CHECK(params.num_groups > 0 && E % params.num_groups == 0 && params.topk_groups > 0 &&
             params.topk_groups <= params.num_groups && params.top_k > 0 &&
             params.top_k <= params.topk_groups * (E / params.num_groups))
      << op << ": " << E << " experts, " << params.num_groups << " groups, keep "
      << params.topk_groups << ", top_k " << params.top_k;
}

// One expert matrix's LoRA stack for E experts of width in -> out.
void check_expert_lora(const KernelContext& ctx, const char* op, const char* name,
                       const ExpertLoraStack& s, int64_t E, int64_t in, int64_t out) {
  expect_tensor(ctx, s.a, DType::kBF16, 4, op, name);
  expect_tensor(ctx, s.b, DType::kBF16, 4, op, name);
  expect_tensor(ctx, s.scale, DType::kF32, 1, op, name);
  const int64_t S = s.a.dim(1), r = s.a.dim(2);
  BEAM_CHECK(s.a.dim(0) == E && s.a.dim(3) == in && s.b.dim(0) == E && s.b.dim(1) == S &&
             s.b.dim(2) == out && s.b.dim(3) == r && s.scale.dim(0) == S)
      << op << ": LoRA " << name << " a " << s.a.shape.str() << ", b " << s.b.shape.str()
      << ", scale " << s.scale.shape.str() << " for " << E << " experts of " << in << " -> " << out;
}

}  // namespace

LoraStack ExpertLoraStack::of_expert(int64_t e) const {
  const int64_t S = a.dim(1), r = a.dim(2);
  return LoraStack{a.rows(e, 1).reshape({S, r, a.dim(3)}), b.rows(e, 1).reshape({S, b.dim(2), r}),
                   scale};
}

void moe_route(const KernelContext& ctx, const TensorView& router_logits, const TensorView& bias,
               const RouterParams& params, const TensorView& ids, const TensorView& weights) {
  constexpr const char* op = "moe_route";
  expect_tensor(ctx, router_logits, DType::kF32, 2, op, "router_logits");
  check_routing(ctx, op, router_logits.dim(0), router_logits.dim(1), bias, params, ids, weights);
  switch (ctx.device) {
    case Device::kCpu:
      cpu::moe_route(cpu_pool(ctx, op), router_logits, bias, params, ids, weights);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::moe_route(*ctx.cuda, router_logits, bias, params, ids, weights);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

void moe_router_route(const KernelContext& ctx, const TensorView& x, const TensorView& router_w,
                      const TensorView& bias, const RouterParams& params, const TensorView& ids,
                      const TensorView& weights, const TensorView& active) {
  constexpr const char* op = "moe_router_route";
  expect_tensor(ctx, x, DType::kBF16, 2, op, "x");
  expect_tensor(ctx, router_w, DType::kF32, 2, op, "router_w");
  BEAM_CHECK(router_w.dim(1) == x.dim(1))
      << op << ": x " << x.shape.str() << ", router_w " << router_w.shape.str();
  check_routing(ctx, op, x.dim(0), router_w.dim(0), bias, params, ids, weights);
  if (active.data != nullptr) {
    expect_tensor(ctx, active, DType::kI32, 1, op, "active");
    BEAM_CHECK(active.dim(0) == 1) << op << ": active " << active.shape.str() << " (want [1])";
  }
  switch (ctx.device) {
    case Device::kCpu: {
      HostTensor logits(DType::kF32, {x.dim(0), router_w.dim(0)});
      linear(ctx, x, router_w, logits.view);
      moe_route(ctx, logits.view, bias, params, ids, weights);
      if (active.data != nullptr) cpu::mark_padding(*active.as<int32_t>(), ids, weights);
      return;
    }
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::moe_router_route(*ctx.cuda, x, router_w, bias, params, ids, weights, active,
                             batch_invariant(ctx));
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

void read_expert_rows(const KernelContext& ctx, ExpertMatrix which, const TensorView& w,
                      int64_t expert, int64_t first, int64_t count, uint16_t* out) {
  constexpr const char* op = "read_expert_rows";
  expect_tensor(ctx, w, DType::kBF16, 3, op, "w");
  BEAM_CHECK(expert >= 0 && expert < w.dim(0) && first >= 0 && count >= 0 &&
             first + count <= w.dim(1))
      << op << ": rows " << first << "+" << count << " of expert " << expert << " of "
      << w.shape.str();
  switch (ctx.device) {
    case Device::kCpu: {
      const auto* src = static_cast<const uint16_t*>(w.data) + (expert * w.dim(1) + first) * w.dim(2);
      std::copy(src, src + count * w.dim(2), out);
      return;
    }
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::read_expert_rows(*ctx.cuda, which, w, expert, first, count, out);
#else
      cuda_backend_not_built(op);
#endif
      return;
  }
}

Status pack_expert_weights(const KernelContext& ctx, ExpertMatrix which, const TensorView& w) {
  constexpr const char* op = "pack_expert_weights";
  expect_tensor(ctx, w, DType::kBF16, 3, op, "w");
  BEAM_CHECK(which != ExpertMatrix::kGateUp || w.dim(1) % 2 == 0)
      << op << ": gate_up " << w.shape.str() << " has an odd row count";
  switch (ctx.device) {
    case Device::kCpu:
      return ok_status();
    case Device::kCuda:
#if BEAMSERVE_CUDA
      return cuda::pack_expert_weights(*ctx.cuda, which, w);
#else
      cuda_backend_not_built(op);
#endif
  }
  return ok_status();
}

void moe_experts(const KernelContext& ctx, const TensorView& x, const TensorView& gate_up,
                 const TensorView& down, const TensorView& ids, const TensorView& weights,
                 const TensorView& out, const MoeLora* lora) {
  constexpr const char* op = "moe_experts";
  expect_tensor(ctx, x, DType::kBF16, 2, op, "x");
  expect_tensor(ctx, gate_up, DType::kBF16, 3, op, "gate_up");
  expect_tensor(ctx, down, DType::kBF16, 3, op, "down");
  expect_tensor(ctx, ids, DType::kI32, 2, op, "ids");
  expect_tensor(ctx, weights, DType::kF32, 2, op, "weights");
  expect_tensor(ctx, out, {DType::kBF16, DType::kF32}, 2, op, "out");
  const int64_t T = x.dim(0), H = x.dim(1), E = gate_up.dim(0), I2 = gate_up.dim(1);
  BEAM_CHECK(gate_up.dim(2) == H && I2 % 2 == 0 && down.dim(0) == E && down.dim(1) == H &&
             down.dim(2) == I2 / 2 && ids.dim(0) == T && weights.shape == ids.shape &&
             out.shape == x.shape)
      << op << ": x " << x.shape.str() << ", gate_up " << gate_up.shape.str() << ", down "
      << down.shape.str() << ", ids " << ids.shape.str() << ", weights " << weights.shape.str()
      << ", out " << out.shape.str();
  if (lora) {
    const int64_t I = I2 / 2;
    check_expert_lora(ctx, op, "gate", lora->gate, E, H, I);
    check_expert_lora(ctx, op, "up", lora->up, E, H, I);
    check_expert_lora(ctx, op, "down", lora->down, E, I, H);
    expect_tensor(ctx, lora->slots, DType::kI32, 1, op, "lora slots");
    BEAM_CHECK(lora->slots.dim(0) == T && lora->up.a.shape == lora->gate.a.shape &&
               lora->down.a.dim(1) == lora->gate.a.dim(1) &&
               lora->down.a.dim(2) == lora->gate.a.dim(2))
        << op << ": LoRA slots " << lora->slots.shape.str() << " for " << T << " tokens, gate a "
        << lora->gate.a.shape.str() << ", up a " << lora->up.a.shape.str() << ", down a "
        << lora->down.a.shape.str();
  }
  switch (ctx.device) {
    case Device::kCpu:
      cpu::moe_experts(cpu_pool(ctx, op), x, gate_up, down, ids, weights, out,
                       batch_invariant(ctx) ? cpu::GemmPath::kTiles : cpu::GemmPath::kAuto, lora);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::moe_experts(*ctx.cuda, x, gate_up, down, ids, weights, out,
                        batch_invariant(ctx) ? cuda::MoeExpertsPath::kGrouped
                                             : cuda::MoeExpertsPath::kAuto,
                        lora);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

}  // namespace beam
