// DeviceOutOfMemory: what a device op throws when its own scratch (grown on first need, not
// planned up front) does not fit the device. The op leaves its scratch empty and consistent, so a
// later call grows it again; the forward pass (BeamModel::forward) and the device sampler catch
// it at their boundary and return it as an error Status, which fails the step's requests (or, in
// the engine's start-up warm-up, names the step budget) instead of aborting the process.
#pragma once

#include <stdexcept>
#include <string>

namespace beam {

struct DeviceOutOfMemory : std::runtime_error {
  explicit DeviceOutOfMemory(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace beam
