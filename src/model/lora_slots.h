// LoraSlots: device memory for LoRA adapters served per request (vLLM's --max-loras /
// --max-lora-rank): for each layer and each supported target module, the factors of every slot
// stacked as kernels/api/lora.h's LoraStack, zero-padded to the slots' rank. An adapter is loaded
// into a slot and cleared from it between forward() calls; a token names its slot in
// SeqChunk::lora_slot. Targets: the attention q / k / v / gate / o projections, the dense MLP's
// gate / up / down and lm_head. Routed-expert LoRA is merge-only (load_beam_weights_merging).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "kernels/api/context.h"
#include "kernels/api/device_memory.h"
#include "kernels/api/lora.h"
#include "kernels/api/releasable_memory.h"
#include "model/config.h"
#include "model/lora_adapter.h"

namespace beam {

// A linear module an adapter may target, per layer (kLmHead: once, after the last layer).
enum class LoraTarget { kQ, kK, kV, kGate, kO, kDenseGate, kDenseUp, kDenseDown, kLmHead };
inline constexpr int kNumLoraTargets = 9;

class LoraSlots {
 public:
  // Zeroed stacks for max_loras slots of rank up to max_rank on ctx's device, for every module of
  // cfg (dense MLP modules on dense layers only); with `releasable`, in ReleasableMemory that sleep
  // mode may give back (releasable_memory()). Errors: a count or rank outside [1, 64] / [1, 512]
  // (CUDA: [1, 128], kernels/api/lora.h's lora_max_rank), or the device out of memory.
  static Expected<std::unique_ptr<LoraSlots>> create(const KernelContext& ctx,
                                                     const BeamConfig& cfg, int max_loras,
                                                     int max_rank, bool releasable = false);

  int num_slots() const { return num_slots_; }
  int max_rank() const { return max_rank_; }
  size_t device_bytes() const { return memory_.nbytes(); }
  // The stacks' memory when create() made it releasable, else null. Once it is restored after a
  // release, clear_all() must run before the slots are loaded or read.
  ReleasableMemory* releasable_memory() const { return releasable_.get(); }

  // Whether load() would take adapter: errors name the adapter's tensor: a module this model
  // lacks or the slots do not serve (routed experts: merge them at load instead), a shape that
  // does not fit the module, a rank above max_rank(). Reads no device memory (any thread).
  Status check(const LoraAdapter& adapter) const;
  // Puts adapter's factors (converted to bf16) into slot, replacing what it held; the caller
  // makes sure no queued step still reads the slot. Errors: check()'s (the slot is then empty).
  Status load(const KernelContext& ctx, int32_t slot, const LoraAdapter& adapter);
  // Zeroes slot (its tokens would then get the base model's outputs).
  void clear(const KernelContext& ctx, int32_t slot);
  // Zeroes every slot.
  void clear_all(const KernelContext& ctx);

  // Layer `layer`'s stack for `target` (kLmHead: any layer), or nullptr when the layer has no such
  // module (dense MLP modules on routed-expert layers).
  const LoraStack* stack(int64_t layer, LoraTarget target) const;

 private:
  struct Module {
    LoraStack stack;
    int64_t in = 0, out = 0;
    std::string weight;  // the checkpoint name of the weight it adapts ("": the layer has none)
    bool present() const { return !weight.empty(); }
  };
  LoraSlots() = default;
  // The module each of adapter's deltas goes to (by delta name), or check()'s error.
  using Placement = std::vector<std::pair<const LoraDelta*, const Module*>>;
  Expected<Placement> place(const LoraAdapter& adapter) const;
  Module& module(int64_t layer, LoraTarget target);
  const Module& module(int64_t layer, LoraTarget target) const;

  int num_slots_ = 0;
  int max_rank_ = 0;
  std::shared_ptr<ReleasableMemory> releasable_;  // memory_'s pages when releasable, else null
  DeviceBuffer memory_;
  std::vector<Module> modules_;  // [num_layers * (kNumLoraTargets - 1) + 1]: lm_head last
};

}  // namespace beam
