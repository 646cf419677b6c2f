// ReleasableMemory: the host implementation (an anonymous mapping) and the device dispatch.
#include "kernels/api/releasable_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

#if BEAMSERVE_CUDA
#include "kernels/cuda/releasable_memory.h"
#endif

namespace beam {
namespace {

// Host pages of an anonymous private mapping: MADV_DONTNEED returns them to the kernel, the next
// touch maps zero pages.
class HostReleasableMemory final : public ReleasableMemory {
 public:
  HostReleasableMemory(void* data, size_t nbytes) : ReleasableMemory(data, nbytes, Device::kCpu) {}
  ~HostReleasableMemory() override { munmap(data(), nbytes()); }

 private:
  void release_pages() override { madvise(data(), nbytes(), MADV_DONTNEED); }
  Status restore_pages() override { return ok_status(); }
};

}  // namespace

void ReleasableMemory::release() {
  if (released_) return;
  release_pages();
  released_ = true;
}

Status ReleasableMemory::restore() {
  if (!released_) return ok_status();
  BEAM_RETURN_IF_ERROR(restore_pages());
  released_ = false;
  return ok_status();
}

Expected<std::shared_ptr<ReleasableMemory>> allocate_releasable(const KernelContext& ctx,
                                                                size_t nbytes) {
  const size_t bytes = nbytes == 0 ? 1 : nbytes;
  switch (ctx.device) {
    case Device::kCpu: {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED)
        return make_error("out of host memory mapping " + std::to_string(nbytes) +
                          " releasable bytes: " + std::strerror(errno));
      return std::shared_ptr<ReleasableMemory>(std::make_shared<HostReleasableMemory>(p, bytes));
    }
    case Device::kCuda:
#if BEAMSERVE_CUDA
      BEAM_CHECK(ctx.cuda != nullptr) << "allocate_releasable: CUDA needs KernelContext::cuda";
      return cuda::allocate_releasable(*ctx.cuda, bytes);
#else
      return make_error(
          "CUDA memory requested but the CUDA backend is not built (configure with "
          "-DBEAMSERVE_CUDA=ON)");
#endif
  }
  return make_error("unknown device");
}

DeviceBuffer releasable_buffer(const std::shared_ptr<ReleasableMemory>& memory) {
  return DeviceBuffer(std::shared_ptr<void>(memory, memory->data()), memory->nbytes(),
                      memory->device());
}

}  // namespace beam
