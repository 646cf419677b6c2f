// NcclGroup: NCCL through dlopen; one ncclComm_t per GPU, made together by ncclCommInitAll.
#include "comm/nccl_group.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <atomic>
#include <mutex>

#include "core/check.h"

namespace beam {

// The NCCL entry points the group uses, resolved once per process (outside the anonymous
// namespace: NcclGroup::Impl holds a pointer to it).
struct NcclApi {
  decltype(&::ncclCommInitAll) init_all = nullptr;
  decltype(&::ncclCommDestroy) destroy = nullptr;
  decltype(&::ncclCommAbort) abort = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclAllGather) all_gather = nullptr;
  decltype(&::ncclGetErrorString) error_string = nullptr;
};

namespace {

Expected<const NcclApi*> load_nccl() {
  static std::once_flag once;
  static NcclApi api;
  static std::string error;
  std::call_once(once, [] {
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      error = std::string("NCCL (libnccl.so.2) not found: ") + dlerror() +
              "; put its directory on LD_LIBRARY_PATH (PyTorch's copy: python3 -c \"import "
              "nvidia.nccl; print(list(nvidia.nccl.__path__)[0] + '/lib')\")";
      return;
    }
    auto find = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (fn == nullptr && error.empty()) error = std::string("NCCL lacks ") + name;
    };
    find(api.init_all, "ncclCommInitAll");
    find(api.destroy, "ncclCommDestroy");
    find(api.abort, "ncclCommAbort");
    find(api.all_reduce, "ncclAllReduce");
    find(api.all_gather, "ncclAllGather");
    find(api.error_string, "ncclGetErrorString");
  });
  if (!error.empty()) return make_error(error);
  return &api;
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kI32:
      return ncclInt32;
    default:
      BEAM_CHECK(false) << "NcclGroup: no NCCL type for " << dtype_name(t);
  }
  return ncclFloat32;
}

}  // namespace

struct NcclGroup::Impl {
  class Rank final : public Communicator {
   public:
    Rank(Impl& group, int r) : group_(group), r_(r) {}
    int rank() const override { return r_; }
    int size() const override { return static_cast<int>(group_.comms.size()); }
    void all_reduce_sum(const TensorView& t) override {
      BEAM_CHECK(t.dtype == DType::kF32 && t.device == Device::kCuda)
          << "all_reduce_sum: f32 on the GPU, got " << dtype_name(t.dtype);
      if (group_.aborted.load() || t.numel() == 0) return;
      group_.check(group_.api->all_reduce(t.data, t.data, static_cast<size_t>(t.numel()),
                                          ncclFloat32, ncclSum, group_.comms[r_], stream()),
                   "ncclAllReduce");
    }
    void all_gather(const TensorView& in, const TensorView& out) override {
      BEAM_CHECK(in.dtype == out.dtype && out.nbytes() == in.nbytes() * size() &&
                 in.device == Device::kCuda && out.device == Device::kCuda)
          << "all_gather: in " << in.shape.str() << ", out " << out.shape.str();
      if (group_.aborted.load() || in.numel() == 0) return;
      group_.check(group_.api->all_gather(in.data, out.data, static_cast<size_t>(in.numel()),
                                          nccl_type(in.dtype), group_.comms[r_], stream()),
                   "ncclAllGather");
    }
    void* stream_ = nullptr;

   private:
    cudaStream_t stream() const {
      BEAM_CHECK(stream_ != nullptr) << "NcclGroup: rank " << r_ << " has no stream bound";
      return static_cast<cudaStream_t>(stream_);
    }
    Impl& group_;
    int r_;
  };

  // A failed NCCL call after an abort is expected; before one it is a lost device or a bug.
  void check(ncclResult_t r, const char* what) const {
    BEAM_CHECK(r == ncclSuccess || aborted.load()) << what << ": " << api->error_string(r);
  }
  Status init() {
    int current = 0;
    cudaGetDevice(&current);
    std::vector<int> devices(comms.size());
    for (size_t i = 0; i < devices.size(); ++i) devices[i] = first_gpu + static_cast<int>(i);
    const ncclResult_t r =
        api->init_all(comms.data(), static_cast<int>(comms.size()), devices.data());
    cudaSetDevice(current);
    if (r != ncclSuccess)
      return make_error(std::string("ncclCommInitAll: ") + api->error_string(r));
    return ok_status();
  }
  void destroy() {
    for (ncclComm_t& c : comms) {
      if (c != nullptr) (aborted.load() ? api->abort : api->destroy)(c);
      c = nullptr;
    }
  }

  const NcclApi* api = nullptr;
  int first_gpu = 0;  // rank r's GPU is first_gpu + r
  std::vector<ncclComm_t> comms;
  std::vector<std::unique_ptr<Rank>> ranks;
  std::atomic<bool> aborted{false};
};

Expected<std::unique_ptr<NcclGroup>> NcclGroup::create(int size, int first_gpu) {
  BEAM_CHECK(size >= 1) << "NcclGroup of " << size << " ranks";
  BEAM_ASSIGN_OR_RETURN(const NcclApi* api, load_nccl());
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess) {
    cudaGetLastError();
    gpus = 0;
  }
  if (first_gpu < 0 || gpus < first_gpu + size)
    return make_error("tensor parallel size " + std::to_string(size) + " from GPU " +
                      std::to_string(first_gpu) + " needs GPUs up to " +
                      std::to_string(first_gpu + size - 1) + "; " + std::to_string(gpus) +
                      " visible");
  auto impl = std::make_unique<Impl>();
  impl->api = api;
  impl->first_gpu = first_gpu;
  impl->comms.assign(static_cast<size_t>(size), nullptr);
  for (int r = 0; r < size; ++r) impl->ranks.push_back(std::make_unique<Impl::Rank>(*impl, r));
  BEAM_RETURN_IF_ERROR(impl->init());
  return std::unique_ptr<NcclGroup>(new NcclGroup(std::move(impl)));
}

NcclGroup::NcclGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NcclGroup::~NcclGroup() {
  impl_->destroy();
}

int NcclGroup::size() const {
  return static_cast<int>(impl_->comms.size());
}
Communicator& NcclGroup::rank(int r) {
  BEAM_CHECK(r >= 0 && r < size()) << "NcclGroup: rank " << r << " of " << size();
  return *impl_->ranks[r];
}
void NcclGroup::bind_stream(int r, void* stream) {
  BEAM_CHECK(r >= 0 && r < size()) << "NcclGroup: rank " << r << " of " << size();
  impl_->ranks[r]->stream_ = stream;
}

// `why` goes nowhere: NCCL's collectives do not throw, and the failing rank reports its error.
void NcclGroup::abort(std::string /*why*/) {
  if (impl_->aborted.exchange(true)) return;  // the first abort does the work
  for (ncclComm_t& c : impl_->comms) {
    if (c != nullptr) impl_->api->abort(c);  // in-flight collectives return
    c = nullptr;
  }
}

bool NcclGroup::aborted() const {
  return impl_->aborted.load();
}

Status NcclGroup::reset() {
  if (!impl_->aborted.load()) return ok_status();
  BEAM_RETURN_IF_ERROR(impl_->init());
  impl_->aborted = false;
  return ok_status();
}

}  // namespace beam
