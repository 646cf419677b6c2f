// CudaContext and StagingArena; the CUDA side of kernels/api/device_memory.h.
#include "kernels/cuda/cuda_context.h"

#include <cstring>
#include <string>

#include "kernels/api/device_memory.h"
#include "kernels/api/device_out_of_memory.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_alloc.h"

namespace beam {
namespace {

constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;  // cuBLASLt's recommendation for Hopper
constexpr size_t kAlign = 256;

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

PinnedRegion::PinnedRegion(size_t capacity, const char* what) {
  if (capacity == 0) return;
  auto* host = static_cast<char*>(pinned_malloc(capacity, what));
  try {
    device_ = static_cast<char*>(device_malloc(capacity, what));
  } catch (const DeviceOutOfMemory&) {
    cudaFreeHost(host);
    throw;
  }
  host_ = host;
  capacity_ = capacity;
}

PinnedRegion::PinnedRegion(PinnedRegion&& other) noexcept
    : host_(other.host_), device_(other.device_), capacity_(other.capacity_) {
  other.host_ = other.device_ = nullptr;
  other.capacity_ = 0;
}

PinnedRegion& PinnedRegion::operator=(PinnedRegion&& other) noexcept {
  if (this != &other) {
    release();
    host_ = other.host_;
    device_ = other.device_;
    capacity_ = other.capacity_;
    other.host_ = other.device_ = nullptr;
    other.capacity_ = 0;
  }
  return *this;
}

PinnedRegion::~PinnedRegion() { release(); }

void PinnedRegion::release() {
  if (host_) cudaFreeHost(host_);
  if (device_) cudaFree(device_);
  host_ = device_ = nullptr;
  capacity_ = 0;
}

void PinnedRegion::upload(size_t offset, size_t nbytes, cudaStream_t stream) const {
  BEAM_CHECK(offset + nbytes <= capacity_)
      << "PinnedRegion: upload of bytes " << offset << "+" << nbytes << " beyond " << capacity_;
  if (nbytes == 0) return;
  CUDA_OK(cudaMemcpyAsync(device_ + offset, host_ + offset, nbytes, cudaMemcpyHostToDevice, stream));
}

void StagingArena::grow(size_t min_bytes) {
  size_t capacity = blocks_.empty() ? size_t{1} << 20 : blocks_.back().capacity() * 2;
  while (capacity < min_bytes) capacity *= 2;
  blocks_.emplace_back(capacity, "per-step staging");
  used_ = 0;
}

void* StagingArena::stage(const void* src, size_t nbytes, cudaStream_t stream) {
  size_t need = align_up(nbytes);
  if (blocks_.empty() || used_ + need > blocks_.back().capacity()) grow(need);
  const PinnedRegion& b = blocks_.back();
  const size_t offset = used_;
  used_ += need;
  if (nbytes == 0) return b.device() + offset;
  std::memcpy(b.host() + offset, src, nbytes);
  b.upload(offset, nbytes, stream);
  return b.device() + offset;
}

void StagingArena::reset() {
  // Keep only the largest (last) block: the next step stages at the same addresses.
  if (blocks_.size() > 1) blocks_.erase(blocks_.begin(), blocks_.end() - 1);
  used_ = 0;
}

OpScratch::~OpScratch() {
  if (base) cudaFree(base);
}

char* OpScratch::reserve(size_t need, cudaStream_t stream, const char* op, size_t zeroed_head) {
  BEAM_CHECK(zeroed_head <= need) << op << ": zeroed head " << zeroed_head << " > " << need;
  if (bytes < need) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    CUDA_OK(cudaStreamIsCapturing(stream, &capture));
    BEAM_CHECK(capture == cudaStreamCaptureStatusNone)
        << op << ": scratch must grow from " << bytes << " to " << need
        << " bytes during graph capture; run the largest batch once before capturing";
    if (base) CUDA_OK(cudaFreeAsync(base, stream));
    base = nullptr;
    bytes = 0;
    base = device_malloc_async(need, stream, op);  // throws DeviceOutOfMemory, leaving it empty
    bytes = need;
    if (zeroed_head > 0) CUDA_OK(cudaMemsetAsync(base, 0, zeroed_head, stream));
  }
  return static_cast<char*>(base);
}

CudaContext::~CudaContext() {
  if (stream) cudaStreamSynchronize(stream);
  if (lt) cublasLtDestroy(lt);
  if (lt_workspace) cudaFree(lt_workspace);
  if (stream) cudaStreamDestroy(stream);
}

Expected<std::shared_ptr<CudaContext>> create_cuda_context(int device_index) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
    return make_error(std::string("no CUDA device available (") + cudaGetErrorString(err) + ")");
  if (device_index < 0 || device_index >= count)
    return make_error("CUDA device " + std::to_string(device_index) + " does not exist (" +
                      std::to_string(count) + " present)");
  CUDA_OK(cudaSetDevice(device_index));
  auto ctx = std::make_shared<CudaContext>();
  ctx->device = device_index;
  CUDA_OK(cudaGetDeviceProperties(&ctx->props, device_index));
  if (ctx->props.major != 9)
    return make_error(std::string("CUDA device ") + ctx->props.name + " is sm_" +
                      std::to_string(ctx->props.major) + std::to_string(ctx->props.minor) +
                      "; this build targets sm_90a (Hopper)");
  CUDA_OK(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
  CUBLAS_OK(cublasLtCreate(&ctx->lt));
  ctx->lt_workspace_bytes = kLtWorkspaceBytes;
  CUDA_OK(cudaMalloc(&ctx->lt_workspace, ctx->lt_workspace_bytes));
  return ctx;
}

void set_programmatic_launch(CudaContext& ctx, bool on) { ctx.programmatic_launch = on; }
bool programmatic_launch(const CudaContext& ctx) { return ctx.programmatic_launch; }

}  // namespace beam
