// CUDA ReleasableMemory: a reserved virtual range (cuMemAddressReserve) mapped to one physical
// allocation (cuMemCreate + cuMemMap + cuMemSetAccess). Release unmaps and frees the physical
// allocation; restore creates a new one and maps it at the same range. The driver functions come
// through the runtime (cudaGetDriverEntryPointByVersion), so nothing links libcuda: binaries still
// load, and list their tests, on a machine without the driver.
#include "kernels/cuda/releasable_memory.h"

#include <cuda.h>
#include <cuda_runtime.h>

#include <string>

#include "core/check.h"
#include "kernels/cuda/check.h"

namespace beam::cuda {
namespace {

// The driver's virtual memory functions (CUDA 10.2's signatures).
struct VmmDriver {
  decltype(&cuGetErrorString) error_string = nullptr;
  decltype(&cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&cuMemAddressReserve) reserve = nullptr;
  decltype(&cuMemAddressFree) free_range = nullptr;
  decltype(&cuMemCreate) create = nullptr;
  decltype(&cuMemRelease) release = nullptr;
  decltype(&cuMemMap) map = nullptr;
  decltype(&cuMemUnmap) unmap = nullptr;
  decltype(&cuMemSetAccess) set_access = nullptr;

  std::string describe(CUresult r) const {
    const char* text = nullptr;
    if (error_string) error_string(r, &text);
    return text ? text : ("CUresult " + std::to_string(static_cast<int>(r)));
  }
  // Aborts on a driver error that is a bug, not a lack of memory.
  void ok(CUresult r, const char* what) const {
    BEAM_CHECK(r == CUDA_SUCCESS) << what << ": " << describe(r);
  }
};

template <typename Fn>
void resolve(const char* symbol, Fn* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  CUDA_OK(cudaGetDriverEntryPointByVersion(symbol, &p, 10020, cudaEnableDefault, &found));
  BEAM_CHECK(found == cudaDriverEntryPointSuccess && p != nullptr)
      << "the CUDA driver has no " << symbol;
  *fn = reinterpret_cast<Fn>(p);
}

VmmDriver load_driver() {
  VmmDriver d;
  resolve("cuGetErrorString", &d.error_string);
  resolve("cuMemGetAllocationGranularity", &d.granularity);
  resolve("cuMemAddressReserve", &d.reserve);
  resolve("cuMemAddressFree", &d.free_range);
  resolve("cuMemCreate", &d.create);
  resolve("cuMemRelease", &d.release);
  resolve("cuMemMap", &d.map);
  resolve("cuMemUnmap", &d.unmap);
  resolve("cuMemSetAccess", &d.set_access);
  return d;
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
  VmmMemory(const VmmDriver& driver, CUdeviceptr base, size_t nbytes, int device)
      : ReleasableMemory(reinterpret_cast<void*>(base), nbytes, Device::kCuda),
        driver_(driver),
        base_(base),
        device_id_(device) {}
  ~VmmMemory() override {
    cudaSetDevice(device_id_);
    if (mapped_) unmap();
    driver_.free_range(base_, nbytes());
  }

  // Physical memory mapped at the range with read-write access; an error when it does not fit.
  Status map() {
    CUDA_OK(cudaSetDevice(device_id_));
    const CUmemAllocationProp prop = device_prop(device_id_);
    const CUresult r = driver_.create(&handle_, nbytes(), &prop, 0);
    if (r != CUDA_SUCCESS) {
      size_t free_bytes = 0, total = 0;
      cudaMemGetInfo(&free_bytes, &total);
      return make_error("CUDA out of memory mapping " + std::to_string(nbytes()) +
                        " releasable bytes (" + std::to_string(free_bytes) + " of " +
                        std::to_string(total) + " free): " + driver_.describe(r));
    }
    driver_.ok(driver_.map(base_, nbytes(), 0, handle_, 0), "cuMemMap");
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    driver_.ok(driver_.set_access(base_, nbytes(), &access, 1), "cuMemSetAccess");
    mapped_ = true;
    return ok_status();
  }

 private:
  void unmap() {
    driver_.ok(driver_.unmap(base_, nbytes()), "cuMemUnmap");
    driver_.ok(driver_.release(handle_), "cuMemRelease");
    mapped_ = false;
  }
  void release_pages() override {
    CUDA_OK(cudaSetDevice(device_id_));
    CUDA_OK(cudaDeviceSynchronize());  // nothing may still use the pages
    unmap();
  }
  Status restore_pages() override { return map(); }

  VmmDriver driver_;
  CUdeviceptr base_;
  int device_id_;
  CUmemGenericAllocationHandle handle_ = 0;
  bool mapped_ = false;
};

}  // namespace

Expected<std::shared_ptr<ReleasableMemory>> allocate_releasable(CudaContext& ctx, size_t nbytes) {
  CUDA_OK(cudaSetDevice(ctx.device));
  CUDA_OK(cudaFree(nullptr));  // the runtime's primary context is current for the driver calls
  const VmmDriver driver = load_driver();
  const CUmemAllocationProp prop = device_prop(ctx.device);
  size_t granularity = 0;
  driver.ok(driver.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
            "cuMemGetAllocationGranularity");
  const size_t bytes = (nbytes + granularity - 1) / granularity * granularity;
  CUdeviceptr base = 0;
  const CUresult r = driver.reserve(&base, bytes, 0, 0, 0);
  if (r != CUDA_SUCCESS)
    return make_error("reserving " + std::to_string(bytes) +
                      " bytes of device addresses: " + driver.describe(r));
  auto memory = std::make_shared<VmmMemory>(driver, base, bytes, ctx.device);
  BEAM_RETURN_IF_ERROR(memory->map());
  return std::shared_ptr<ReleasableMemory>(std::move(memory));
}

}  // namespace beam::cuda
