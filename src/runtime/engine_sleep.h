// SleepController: the memory Engine::sleep gives back and wake_up takes again — the weights'
// arena (CUDA; a host copy at SleepLevel::kOffloadWeights), with it the LoRA slots' stacks (no
// copy: wake_up zeroes them and the engine loads its adapters again from their host copies), and
// the KV pools — and the SleepState that says what is missing. Used on the engine thread with
// nothing in flight.
#pragma once

#include <memory>

#include "core/status.h"
#include "kernels/api/context.h"
#include "kernels/api/releasable_memory.h"
#include "model/lora_slots.h"
#include "runtime/engine.h"
#include "runtime/kv_cache/releasable_kv_allocator.h"

namespace beam {

class SleepController {
 public:
  SleepController() = default;  // sleep mode off
  // weights: the device weights' arena (null on the CPU); lora: the model's LoRA slots (null
  // without; released with the weights when their memory is releasable); kv: the engine's KV
  // allocator.
  SleepController(KernelContext ctx, std::shared_ptr<ReleasableMemory> weights, LoraSlots* lora,
                  ReleasableKvAllocator* kv)
      : ctx_(ctx), weights_(std::move(weights)), lora_(lora), kv_(kv) {}

  const SleepState& state() const { return state_; }
  // Whether sleep(_, weights, kv_cache) would release something: errors for sleep mode off,
  // nothing named, a named part already released (the caller checks before emptying the cache).
  Status check_sleep(bool weights, bool kv_cache) const;
  // Releases the KV pools and / or the weights (copied to host memory first at kOffloadWeights;
  // on the CPU the weights stay). The pools must hold nothing that is still needed. Returns the
  // bytes given back (pools, weights, LoRA stacks). Errors: check_sleep's (then nothing changes).
  Expected<int64_t> sleep(SleepLevel level, bool weights, bool kv_cache);
  // Restores the weights (their host copy unless discarded) and / or the KV pools. The LoRA
  // slots come back empty (zeroed) before the weights: while the weights are out, so are they.
  Status wake_up(bool weights, bool kv_cache);
  // Whether the device weights can take new ones (update_weights): an error while released.
  Status check_weights_writable() const;
  // New weights were copied in: discarded ones are whole again.
  void weights_replaced() { state_.weights_discarded = false; }

 private:
  ReleasableMemory* lora_memory() const { return lora_ ? lora_->releasable_memory() : nullptr; }

  KernelContext ctx_;
  std::shared_ptr<ReleasableMemory> weights_;
  LoraSlots* lora_ = nullptr;
  ReleasableKvAllocator* kv_ = nullptr;
  std::unique_ptr<char[]> host_copy_;  // the weights' bytes while offloaded (weights_->nbytes())
  SleepState state_;
};

}  // namespace beam
