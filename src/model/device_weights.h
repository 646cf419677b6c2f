// Weights on the device: a copy of a loaded BeamWeights whose views point into device memory of a
// KernelContext (one arena per model), so BeamModel reads them without knowing where they live.
#pragma once

#include <cstdint>
#include <memory>

#include "core/status.h"
#include "kernels/api/context.h"
#include "kernels/api/device_memory.h"
#include "kernels/api/releasable_memory.h"
#include "model/weights.h"

namespace beam {

struct DeviceWeights {
  std::shared_ptr<const BeamWeights> weights;  // views on ctx.device
  int64_t device_bytes = 0;                    // bytes allocated on the device (0 on the CPU)
  std::shared_ptr<ReleasableMemory> memory;    // the arena, when uploaded releasable
};

// One model's weight memory on ctx.device: a plain buffer, or (sleep mode) ReleasableMemory
// whose buffer view is `buffer`.
struct WeightArena {
  DeviceBuffer buffer;
  std::shared_ptr<ReleasableMemory> memory;  // set when releasable
};
// nbytes for weights on ctx.device; errors name the bytes that did not fit.
Expected<WeightArena> allocate_weight_arena(const KernelContext& ctx, size_t nbytes,
                                            bool releasable);

// A synthetic layout (BeamWeights::synthetic) is filled on ctx.device (fill_synthetic,
// model/synthetic_weights.h), on the CPU too. Otherwise Device::kCpu: the host weights unchanged (deferred expert matrices, ExpertCopy::kDeferred,
// converted into host buffers of their own). Device::kCuda: every tensor copied into one device
// arena (tensors 256-byte aligned; views that alias, e.g. a tied lm_head, stay aliased), deferred
// expert matrices streamed from the checkpoint's files (model/weight_stream.h); the returned
// BeamWeights keeps the arena alive and no longer needs `host`; `releasable`: the arena is
// ReleasableMemory (sleep mode), returned as DeviceWeights::memory. Errors name the bytes that
// did not fit.
Expected<DeviceWeights> upload_weights(const KernelContext& ctx,
                                       std::shared_ptr<const BeamWeights> host,
                                       bool releasable = false);

// Overwrites the device weights `device` (upload_weights' result, views on ctx.device) with the
// host weights `host` of the same architecture, in place (the views keep their addresses, so
// captured CUDA graphs stay valid), and packs the experts again; `host`'s deferred expert matrices
// stream from its mapping. Errors: a tensor whose shape or dtype differs (nothing is copied then).
// ctx.device must be kCuda; synthetic layouts are refused (nothing to copy).
// A read that fails once copying began (a checkpoint file cut short meanwhile) leaves the device
// weights part new, part old: *partial (optional) is then set; every earlier error (the checks
// above, a file already cut short) leaves them as they were.
Status copy_weights_into(const KernelContext& ctx, const BeamWeights& device,
                         const BeamWeights& host, bool* partial = nullptr);

// Puts every MoE layer's expert tensors (views on ctx.device) into the layout moe_experts reads
// there (kernels/api/moe.h's pack_expert_weights), in place; upload_weights and the synthetic
// weights call it once. Errors: a temporary the device cannot hold.
Status pack_moe_weights(const KernelContext& ctx, const BeamWeights& w);

}  // namespace beam
