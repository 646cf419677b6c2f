// command_weights: --load-format picks the checkpoint or a synthetic layout.
#include "cli/command_weights.h"

#include "model/synthetic_weights.h"

namespace beam::cli {

Expected<std::shared_ptr<const BeamWeights>> command_weights(const Args& args,
                                                             const std::string& dir, Device device) {
  BEAM_ASSIGN_OR_RETURN(const bool dummy, args.get_dummy_weights());
  if (dummy) {
    BEAM_ASSIGN_OR_RETURN(BeamConfig config, load_beam_config(dir));
    return synthetic_layout(config, SyntheticWeightOptions{});
  }
  BEAM_ASSIGN_OR_RETURN(std::shared_ptr<BeamWeights> w,
                        load_beam_weights(dir, nullptr, {}, expert_copy_for(device)));
  return std::shared_ptr<const BeamWeights>(std::move(w));
}

}  // namespace beam::cli
