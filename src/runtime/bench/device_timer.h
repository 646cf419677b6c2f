// DeviceTimer: times work queued on a KernelContext — CUDA events on the context's stream on the
// GPU, the host clock after synchronize() on the CPU — plus GPU identification for bench reports.
#pragma once

#include <memory>
#include <string>

#include "kernels/api/context.h"

namespace beam {

// Owned by one thread. Usage: start(); <queue work>; double ms = stop();
class DeviceTimer {
 public:
  explicit DeviceTimer(const KernelContext& ctx);
  ~DeviceTimer();
  DeviceTimer(const DeviceTimer&) = delete;
  DeviceTimer& operator=(const DeviceTimer&) = delete;

  void start();
  // Milliseconds between start() and now on the device's timeline; waits for the queued work.
  double stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "NVIDIA H200" (cudaDeviceProp::name) for Device::kCuda, "cpu" otherwise.
std::string device_name(const KernelContext& ctx);

}  // namespace beam
