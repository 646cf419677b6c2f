// The host weights `generate` and `bench offline` hand to the engine: a model folder's checkpoint
// or, with --load-format dummy, random weights of its config.
#pragma once

#include <memory>
#include <string>

#include "cli/args.h"
#include "core/status.h"
#include "model/weights.h"

namespace beam::cli {

// DIR's checkpoint (on CUDA the routed experts stay in the mapping until the upload streams them:
// expert_copy_for), or with --load-format dummy a synthetic layout of DIR/config.json that the
// upload fills on the device (model/synthetic_weights.h). Errors: the flag's, the load's.
Expected<std::shared_ptr<const BeamWeights>> command_weights(const Args& args,
                                                             const std::string& dir, Device device);

}  // namespace beam::cli
