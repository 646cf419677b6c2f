// Device-neutral memory for tensors: allocation, copies between host and device, and the CUDA
// context's lifetime. The model and runtime use only this header, never CUDA's, so they build
// and run unchanged with and without the CUDA backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/status.h"
#include "kernels/api/context.h"

namespace beam {

// An owning allocation on one device (host: 64-byte aligned; CUDA: cudaMalloc, 256-byte aligned).
// Copies share the allocation; it is freed with the last copy.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::shared_ptr<void> data, size_t nbytes, Device device)
      : data_(std::move(data)), nbytes_(nbytes), device_(device) {}
  void* data() const { return data_.get(); }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  const std::shared_ptr<void>& owner() const { return data_; }
  // A [shape] view of the first bytes (checked against nbytes).
  TensorView view(DType dtype, Shape shape) const;

 private:
  std::shared_ptr<void> data_;
  size_t nbytes_ = 0;
  Device device_ = Device::kCpu;
};

// Host-written metadata with a device mirror at fixed addresses (CUDA: a PinnedRegion, see
// kernels/cuda/cuda_context.h for the one staging mechanism; CPU: host memory, device() == host()).
// The host writes host(), upload_metadata() queues the copy; kernels read device(). Copies share
// the memory; it is freed with the last copy (on CUDA that synchronizes the device).
class MetadataBuffer {
 public:
  MetadataBuffer() = default;
  MetadataBuffer(std::shared_ptr<void> owner, void* host, void* device, size_t nbytes, Device where)
      : owner_(std::move(owner)), host_(host), device_(device), nbytes_(nbytes), where_(where) {}
  void* host() const { return host_; }
  void* device() const { return device_; }
  size_t nbytes() const { return nbytes_; }
  Device where() const { return where_; }
  // A [shape] view of the device bytes at byte offset (checked against nbytes).
  TensorView device_view(size_t offset, DType dtype, Shape shape) const;

 private:
  std::shared_ptr<void> owner_;
  void* host_ = nullptr;
  void* device_ = nullptr;
  size_t nbytes_ = 0;
  Device where_ = Device::kCpu;
};

// nbytes of metadata on ctx.device; an error when memory runs out. Never inside a graph capture.
Expected<MetadataBuffer> allocate_metadata(const KernelContext& ctx, size_t nbytes);
// Queues the copy of bytes [offset, offset + nbytes) from host() to device() on ctx's stream
// (no-op on the CPU). The host must not rewrite them until the step has synchronized.
void upload_metadata(const KernelContext& ctx, const MetadataBuffer& buffer, size_t offset, size_t nbytes);

// nbytes on ctx.device; an error (naming the size) when the device is out of memory.
Expected<DeviceBuffer> allocate_buffer(const KernelContext& ctx, size_t nbytes);

// dst = src (same dtype and element count; each on the host or on ctx's device). Ordered on ctx's
// stream; a copy to host memory has completed when this returns.
void copy_tensor(const KernelContext& ctx, const TensorView& dst, const TensorView& src);

// Sets every byte of t (on ctx's device) to zero, ordered on ctx's stream.
void zero_tensor(const KernelContext& ctx, const TensorView& t);

// `rows` rows of row_bytes bytes, row i at data + i * pitch (pitch >= row_bytes), on the host or
// on a context's device: e.g. one slot's part of each of several [S, ...] stacks.
struct PitchedRows {
  void* data = nullptr;
  Device device = Device::kCpu;
  size_t pitch = 0, row_bytes = 0, rows = 0;
};
// dst's rows = src's (the same row_bytes and rows): one copy for all of them, ordered on ctx's
// stream; a copy from or to host memory has completed when this returns.
void copy_rows(const KernelContext& ctx, const PitchedRows& dst, const PitchedRows& src);
// Sets every byte of t's rows to zero, ordered on ctx's stream.
void zero_rows(const KernelContext& ctx, const PitchedRows& t);
// nbytes of host memory ctx's device copies to and from without staging (CUDA: pinned by
// cudaMallocHost; CPU: plain, 64-byte aligned); an error naming the size when none is left.
// The buffer's device is the host; freeing it (last copy) must follow the copies that use it.
Expected<DeviceBuffer> allocate_pinned_host(const KernelContext& ctx, size_t nbytes);
// copy_rows without waiting (the same on the CPU): queued on ctx's stream; host rows must be
// allocate_pinned_host memory that the host leaves alone until the stream has synchronized.
void copy_rows_async(const KernelContext& ctx, const PitchedRows& dst, const PitchedRows& src);

// Waits until all work queued on ctx has finished (no-op on the CPU).
void synchronize(const KernelContext& ctx);

// Starts a forward step: per-step staging memory (batch metadata the CUDA ops copy to the device)
// is reused from here on. The caller must have synchronized the previous step. No-op on the CPU.
void begin_step(const KernelContext& ctx);

// ---- CUDA graphs (model/beam/decode_graphs.h) ----
// A captured and instantiated CUDA graph of work on ctx's stream. Copies share it.
class StepGraph {
 public:
  StepGraph() = default;
  explicit StepGraph(std::shared_ptr<void> exec) : exec_(std::move(exec)) {}
  bool valid() const { return exec_ != nullptr; }
  void* exec() const { return exec_.get(); }

 private:
  std::shared_ptr<void> exec_;
};

// Starts capturing the work queued on ctx's stream (CUDA only): ops are recorded, not run, until
// end_graph_capture. Nothing inside may synchronize, allocate, or copy pageable memory.
void begin_graph_capture(const KernelContext& ctx);
// Ends the capture and instantiates the graph; an error (the CUDA message) when capture failed.
Expected<StepGraph> end_graph_capture(const KernelContext& ctx);
// Queues one replay of graph on ctx's stream.
void launch_graph(const KernelContext& ctx, const StepGraph& graph);
// Identifies the context's lazily grown scratch that ops reach without the caller's tensors
// (CUDA: MoE and linear scratch, fixed attention plans). A captured graph stays valid while this
// value is unchanged; 0 on the CPU.
uint64_t graph_fingerprint(const KernelContext& ctx);

// A CUDA stream, cuBLASLt handle and workspace, and staging memory on GPU `device_index`;
// KernelContext::cuda points at it. An error in builds without the CUDA backend or without a GPU.
Expected<std::shared_ptr<CudaContext>> create_cuda_context(int device_index);
// GPUs this process sees (0 in builds without the CUDA backend or with no GPU).
int cuda_device_count();
// Makes ctx's GPU the calling thread's current device, where its kernel launches and graph
// replays go (a thread that runs ctx's ops and did not create it); nothing on the CPU.
void bind_calling_thread(const KernelContext& ctx);
// Whether ctx's kernels launch as programmatic dependents of their predecessors where they allow
// it (on by default; off: every launch waits for the previous kernel, e.g. to measure PDL).
void set_programmatic_launch(CudaContext& ctx, bool on);
bool programmatic_launch(const CudaContext& ctx);

// Free and total bytes of ctx's device memory (cudaMemGetInfo); zeros for Device::kCpu.
struct DeviceMemoryInfo {
  int64_t free_bytes = 0;
  int64_t total_bytes = 0;
};
DeviceMemoryInfo device_memory_info(const KernelContext& ctx);

// "NVIDIA H200, 139.8 GiB free of 139.8 GiB" for logs; "CPU" for Device::kCpu.
std::string describe_device(const KernelContext& ctx);

// The stream ctx's work is queued on (a cudaStream_t on CUDA; null on the CPU), for a library
// that queues its own work in the same order (NCCL's collectives).
void* native_stream(const KernelContext& ctx);

}  // namespace beam
