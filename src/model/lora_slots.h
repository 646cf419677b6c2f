// LoraSlots: device memory for LoRA adapters served per request (vLLM's --max-loras /
// --max-lora-rank): for each layer and each supported target module, the factors of every slot
// stacked as kernels/api/lora.h's LoraStack (routed experts: kernels/api/moe.h's ExpertLoraStack),
// zero-padded to the slots' rank. An adapter is loaded into a slot and cleared from it between
// forward() calls; a token names its slot in SeqChunk::lora_slot. Targets: the attention q / k / v
// / gate / o projections, the dense MLP's gate / up / down, lm_head and, when asked for (their
// memory is E times a dense MLP's), the routed experts' gate / up / down.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "kernels/api/context.h"
#include "kernels/api/device_memory.h"
#include "kernels/api/lora.h"
#include "kernels/api/moe.h"
#include "kernels/api/releasable_memory.h"
#include "model/config.h"
#include "model/lora_adapter.h"
#include "model/tensor_parallel.h"

namespace beam {

// A linear module an adapter may target, per layer (kLmHead: once, after the last layer; the
// expert targets stand for every routed expert's matrix of the layer).
enum class LoraTarget {
  kQ,
  kK,
  kV,
  kGate,
  kO,
  kDenseGate,
  kDenseUp,
  kDenseDown,
  kExpertGate,
  kExpertUp,
  kExpertDown,
  kLmHead
};
inline constexpr int kNumLoraTargets = 12;

// What LoraSlots::create allocates.
struct LoraSlotsOptions {
  int max_loras = 1;        // slots (adapters one step serves)
  int max_rank = 16;        // the highest adapter rank a slot holds
  bool experts = false;     // stacks for the routed experts too (SGLang / vLLM serve expert LoRA)
  bool releasable = false;  // in ReleasableMemory that sleep mode may give back
  // The tensor-parallel rank whose share the slots hold (model/tensor_parallel.h): the column-
  // parallel modules' rows of lora_B (q / k / v / gate, the dense gate / up, lm_head), o_proj and
  // the dense down whole (BeamModel gathers their inputs from every rank), its routed experts.
  TensorParallel tp = {};
};

class LoraSlots {
 public:
  // Zeroed stacks for the options' slots and rank on ctx's device, for every module of cfg (dense
  // MLP modules on dense layers only, expert modules on routed-expert layers when asked for); with
  // releasable, in ReleasableMemory (releasable_memory()). Errors: a count or rank outside [1, 64]
  // / [1, 512] (kernels/api/lora.h's lora_max_rank of the device), or the device out of memory.
  static Expected<std::unique_ptr<LoraSlots>> create(const KernelContext& ctx,
                                                     const BeamConfig& cfg,
                                                     const LoraSlotsOptions& options);

  int num_slots() const { return num_slots_; }
  int max_rank() const { return max_rank_; }
  // Whether the slots serve the routed experts (LoraSlotsOptions::experts on a model with some).
  bool serves_experts() const { return serves_experts_; }
  size_t device_bytes() const { return memory_.nbytes(); }
  // The stacks' memory when create() made it releasable, else null. Once it is restored after a
  // release, clear_all() must run before the slots are loaded or read.
  ReleasableMemory* releasable_memory() const { return releasable_.get(); }

  // Whether load() would take adapter: errors name the adapter's tensor: a module this model
  // lacks or the slots do not serve (routed experts without LoraSlotsOptions::experts), a shape
  // that does not fit the module, a rank above max_rank(). Reads no device memory (any thread).
  Status check(const LoraAdapter& adapter) const;
  // Puts adapter's factors (converted to bf16) into slot, replacing what it held; the caller
  // makes sure no queued step still reads the slot. Errors: check()'s (the slot is then empty).
  Status load(const KernelContext& ctx, int32_t slot, const LoraAdapter& adapter);
  // Zeroes slot (its tokens would then get the base model's outputs).
  void clear(const KernelContext& ctx, int32_t slot);
  // Zeroes every slot.
  void clear_all(const KernelContext& ctx);

  // Layer `layer`'s stack for a target other than the experts' (kLmHead: any layer), or nullptr
  // when the layer has no such module (dense MLP modules on routed-expert layers).
  const LoraStack* stack(int64_t layer, LoraTarget target) const;
  // Layer `layer`'s stack for an expert target, or nullptr when the slots do not serve the
  // layer's experts (a dense layer, or !serves_experts()).
  const ExpertLoraStack* expert_stack(int64_t layer, LoraTarget target) const;

 private:
  struct Module {
    LoraStack stack;          // a module of one weight
    ExpertLoraStack experts;  // an expert module: num_experts weights
    int64_t in = 0, out = 0, num_experts = 0;
    int64_t full_out = 0;      // the module's rows (out: this rank's, from first_row)
    int64_t first_row = 0;
    int64_t first_expert = 0;  // the rank's experts [first_expert, first_expert + num_experts)
    int64_t all_experts = 0;   // the layer's experts on every rank
    int64_t layer = 0;
    LoraTarget target = LoraTarget::kQ;
    bool present = false;  // whether the layer has this module and the slots serve it
    // The checkpoint name of the weight it adapts (expert e's for expert modules: e counts every
    // rank's experts).
    std::string weight(int64_t e = 0) const;
    // The stack of expert e (expert modules) or of the module.
    LoraStack stack_of(int64_t e) const { return num_experts ? experts.of_expert(e) : stack; }
    // The stacks the module holds: one per expert, or one.
    int64_t num_stacks() const { return num_experts ? num_experts : 1; }
    // Every stack's A [num_stacks, S, R, in] and B [num_stacks, S, out, R].
    TensorView all_a() const;
    TensorView all_b() const;
  };
  // Where one of an adapter's deltas goes: a module and, for an expert module, the expert (this
  // rank's index; -1 for another rank's expert, which the rank checks but does not hold).
  struct Place {
    const LoraDelta* delta;
    const Module* module;
    int64_t expert;
    int64_t global_expert;  // counting every rank's experts (messages)
  };
  LoraSlots() = default;
  // The module each of adapter's deltas goes to (by delta name), or check()'s error.
  using Placement = std::vector<Place>;
  Expected<Placement> place(const LoraAdapter& adapter) const;
  Module& module(int64_t layer, LoraTarget target);
  const Module& module(int64_t layer, LoraTarget target) const;

  int num_slots_ = 0;
  int max_rank_ = 0;
  bool serves_experts_ = false;
  std::shared_ptr<ReleasableMemory> releasable_;  // memory_'s pages when releasable, else null
  DeviceBuffer memory_;
  std::vector<Module> modules_;  // [num_layers * (kNumLoraTargets - 1) + 1]: lm_head last
};

}  // namespace beam
