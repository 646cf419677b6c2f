// Per-request LoRA factors for moe_experts tests (kernels/api/moe.h's MoeLora), on the host: S
// slots of rank r on every expert matrix of E experts (hidden H, expert width I), uniform factors
// of 0.1 (deltas of the order of the outputs), scales 0.5 + 0.5 s; token t on slot
// t % (S + 1) - 1 (kNoLoraSlot first).
#pragma once

#include <cstdint>
#include <functional>

#include "kernel_test_util.h"
#include "kernels/api/moe.h"

namespace beam::test {

struct ExpertLoraFactors {
  HostTensor gate_a, gate_b, up_a, up_b, down_a, down_b, scale, slots;
  int64_t num_slots, rank;

  int32_t slot(int64_t t) const { return slots.as<int32_t>()[t]; }

  // The MoeLora of tokens [t0, t0 + n) on `view`s of the factors (the host tensors, or uploads).
  MoeLora lora(const std::function<TensorView(const HostTensor&)>& view, int64_t t0,
               int64_t n) const {
    const TensorView s = view(scale);
    return MoeLora{{view(gate_a), view(gate_b), s},
                   {view(up_a), view(up_b), s},
                   {view(down_a), view(down_b), s},
                   view(slots).rows(t0, n)};
  }
};

inline ExpertLoraFactors make_expert_lora(int64_t T, int64_t H, int64_t E, int64_t I, int64_t S,
                                          int64_t r, uint64_t seed) {
  ExpertLoraFactors l{HostTensor(DType::kBF16, {E, S, r, H}),
                      HostTensor(DType::kBF16, {E, S, I, r}),
                      HostTensor(DType::kBF16, {E, S, r, H}),
                      HostTensor(DType::kBF16, {E, S, I, r}),
                      HostTensor(DType::kBF16, {E, S, r, I}),
                      HostTensor(DType::kBF16, {E, S, H, r}),
                      HostTensor(DType::kF32, {S}),
                      HostTensor(DType::kI32, {T}),
                      S,
                      r};
  for (HostTensor* f : {&l.gate_a, &l.gate_b, &l.up_a, &l.up_b, &l.down_a, &l.down_b})
    fill_uniform(f->view, seed++, 0.1f);
  for (int64_t s = 0; s < S; ++s) l.scale.as<float>()[s] = 0.5f + 0.5f * static_cast<float>(s);
  for (int64_t t = 0; t < T; ++t) l.slots.as<int32_t>()[t] = static_cast<int32_t>(t % (S + 1)) - 1;
  return l;
}

}  // namespace beam::test
