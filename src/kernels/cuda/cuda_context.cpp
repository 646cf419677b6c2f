// CudaContext and StagingArena; the CUDA side of kernels/api/device_memory.h.
#include "kernels/cuda/cuda_context.h"

#include <cstring>
#include <string>

#include "kernels/api/device_memory.h"
#include "kernels/cuda/check.h"

namespace beam {
namespace {

constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;  // cuBLASLt's recommendation for Hopper
constexpr size_t kAlign = 256;

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

StagingArena::~StagingArena() {
  for (Block& b : blocks_) {
    cudaFreeHost(b.host);
    cudaFree(b.device);
  }
}

void StagingArena::grow(size_t min_bytes) {
  size_t capacity = blocks_.empty() ? size_t{1} << 20 : blocks_.back().capacity * 2;
  while (capacity < min_bytes) capacity *= 2;
  Block b;
  b.capacity = capacity;
  CUDA_OK(cudaMallocHost(&b.host, capacity));
  CUDA_OK(cudaMalloc(&b.device, capacity));
  blocks_.push_back(b);
  used_ = 0;
}

void* StagingArena::stage(const void* src, size_t nbytes, cudaStream_t stream) {
  size_t need = align_up(nbytes);
  if (blocks_.empty() || used_ + need > blocks_.back().capacity) grow(need);
  Block& b = blocks_.back();
  void* host = b.host + used_;
  void* device = b.device + used_;
  used_ += need;
  if (nbytes == 0) return device;
  std::memcpy(host, src, nbytes);
  CUDA_OK(cudaMemcpyAsync(device, host, nbytes, cudaMemcpyHostToDevice, stream));
  return device;
}

void StagingArena::reset() {
  // Keep only the largest (last) block: the next step stages at the same addresses.
  while (blocks_.size() > 1) {
    CUDA_OK(cudaFreeHost(blocks_.front().host));
    CUDA_OK(cudaFree(blocks_.front().device));
    blocks_.erase(blocks_.begin());
  }
  used_ = 0;
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

}  // namespace beam
