// CUDA ReleasableMemory: a reserved virtual range (cuMemAddressReserve) mapped to one physical
// allocation (cuMemCreate + cuMemMap + cuMemSetAccess). Release unmaps and frees the physical
// allocation; restore creates a new one and maps it at the same range.
#include "kernels/cuda/releasable_memory.h"

#include <cuda.h>
#include <cuda_runtime.h>

#include <string>

#include "core/check.h"
#include "kernels/cuda/check.h"

namespace beam::cuda {
namespace {

std::string driver_error(CUresult r) {
  const char* text = nullptr;
  cuGetErrorString(r, &text);
  return text ? text : ("CUresult " + std::to_string(static_cast<int>(r)));
}

// Aborts on a driver error that is a bug, not a lack of memory.
void driver_ok(CUresult r, const char* what) {
  BEAM_CHECK(r == CUDA_SUCCESS) << what << ": " << driver_error(r);
}

CUmemAllocationProp device_prop(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

class VmmMemory final : public ReleasableMemory {
 public:
  VmmMemory(CUdeviceptr base, size_t nbytes, int device)
      : ReleasableMemory(reinterpret_cast<void*>(base), nbytes, Device::kCuda),
        base_(base),
        device_id_(device) {}
  ~VmmMemory() override {
    cudaSetDevice(device_id_);
    if (mapped_) unmap();
    cuMemAddressFree(base_, nbytes());
  }

  // Physical memory mapped at the range with read-write access; an error when it does not fit.
  Status map() {
    CUDA_OK(cudaSetDevice(device_id_));
    const CUmemAllocationProp prop = device_prop(device_id_);
    CUresult r = cuMemCreate(&handle_, nbytes(), &prop, 0);
    if (r != CUDA_SUCCESS) {
      size_t free_bytes = 0, total = 0;
      cudaMemGetInfo(&free_bytes, &total);
      return make_error("CUDA out of memory mapping " + std::to_string(nbytes()) +
                        " releasable bytes (" + std::to_string(free_bytes) + " of " +
                        std::to_string(total) + " free): " + driver_error(r));
    }
    driver_ok(cuMemMap(base_, nbytes(), 0, handle_, 0), "cuMemMap");
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    driver_ok(cuMemSetAccess(base_, nbytes(), &access, 1), "cuMemSetAccess");
    mapped_ = true;
    return ok_status();
  }

 private:
  void unmap() {
    driver_ok(cuMemUnmap(base_, nbytes()), "cuMemUnmap");
    driver_ok(cuMemRelease(handle_), "cuMemRelease");
    mapped_ = false;
  }
  void release_pages() override {
    CUDA_OK(cudaSetDevice(device_id_));
    CUDA_OK(cudaDeviceSynchronize());  // nothing may still use the pages
    unmap();
  }
  Status restore_pages() override { return map(); }

  CUdeviceptr base_;
  int device_id_;
  CUmemGenericAllocationHandle handle_ = 0;
  bool mapped_ = false;
};

}  // namespace

Expected<std::shared_ptr<ReleasableMemory>> allocate_releasable(CudaContext& ctx, size_t nbytes) {
  CUDA_OK(cudaSetDevice(ctx.device));
  CUDA_OK(cudaFree(nullptr));  // the runtime's primary context is current for the driver calls
  const CUmemAllocationProp prop = device_prop(ctx.device);
  size_t granularity = 0;
  driver_ok(
      cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
      "cuMemGetAllocationGranularity");
  const size_t bytes = (nbytes + granularity - 1) / granularity * granularity;
  CUdeviceptr base = 0;
  const CUresult r = cuMemAddressReserve(&base, bytes, 0, 0, 0);
  if (r != CUDA_SUCCESS)
    return make_error("reserving " + std::to_string(bytes) +
                      " bytes of device addresses: " + driver_error(r));
  auto memory = std::make_shared<VmmMemory>(base, bytes, ctx.device);
  BEAM_RETURN_IF_ERROR(memory->map());
  return std::shared_ptr<ReleasableMemory>(std::move(memory));
}

}  // namespace beam::cuda
