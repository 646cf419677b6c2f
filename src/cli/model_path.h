// Default model resolution for the CLI: --model, else $BEAMSERVE_MODEL, else the shipped
// models/beam-nano (then models/tiny-beam) next to the source tree the binary was built from.
#pragma once

#include <optional>
#include <string>

#include "core/status.h"

namespace beam::cli {

Expected<std::string> resolve_model_dir(const std::optional<std::string>& flag);

}  // namespace beam::cli
