// Device-neutral allocation and copies: host memory here, CUDA through kernels/cuda.
#include "kernels/api/device_memory.h"

#include <cstdlib>
#include <cstring>

#if BEAMSERVE_CUDA
#include "kernels/cuda/device_memory.h"
#endif

namespace beam {
namespace {

#if BEAMSERVE_CUDA
CudaContext& cuda_of(const KernelContext& ctx, const char* op) {
  BEAM_CHECK(ctx.cuda != nullptr) << op << ": CUDA ops need KernelContext::cuda";
  return *ctx.cuda;
}
#endif

}  // namespace

TensorView DeviceBuffer::view(DType dtype, Shape shape) const {
  BEAM_CHECK(static_cast<size_t>(shape.numel()) * dtype_size(dtype) <= nbytes_)
      << "view " << shape.str() << " exceeds buffer of " << nbytes_ << " bytes";
  return TensorView{data_.get(), dtype, shape, device_};
}

TensorView MetadataBuffer::device_view(size_t offset, DType dtype, Shape shape) const {
  BEAM_CHECK(offset + static_cast<size_t>(shape.numel()) * dtype_size(dtype) <= nbytes_)
      << "metadata view " << shape.str() << " at byte " << offset << " exceeds buffer of "
      << nbytes_ << " bytes";
  return TensorView{static_cast<char*>(device_) + offset, dtype, shape, where_};
}

Expected<MetadataBuffer> allocate_metadata(const KernelContext& ctx, size_t nbytes) {
  switch (ctx.device) {
    case Device::kCpu: {
      BEAM_ASSIGN_OR_RETURN(DeviceBuffer b, allocate_buffer(ctx, nbytes));
      return MetadataBuffer(b.owner(), b.data(), b.data(), nbytes, Device::kCpu);
    }
    case Device::kCuda:
#if BEAMSERVE_CUDA
      return cuda::allocate_metadata(cuda_of(ctx, "allocate_metadata"), nbytes);
#else
      return make_error("CUDA memory requested but the CUDA backend is not built (configure with -DBEAMSERVE_CUDA=ON)");
#endif
  }
  return make_error("unknown device");
}

void upload_metadata(const KernelContext& ctx, const MetadataBuffer& buffer, size_t offset, size_t nbytes) {
  BEAM_CHECK(offset + nbytes <= buffer.nbytes())
      << "upload_metadata: bytes " << offset << "+" << nbytes << " beyond " << buffer.nbytes();
  if (buffer.where() == Device::kCpu) return;
#if BEAMSERVE_CUDA
  cuda::copy_async(cuda_of(ctx, "upload_metadata"), static_cast<char*>(buffer.device()) + offset,
                   static_cast<const char*>(buffer.host()) + offset, nbytes);
#else
  BEAM_CHECK(false) << "upload_metadata: CUDA memory but the CUDA backend is not built";
#endif
}

Expected<DeviceBuffer> allocate_buffer(const KernelContext& ctx, size_t nbytes) {
  switch (ctx.device) {
    case Device::kCpu: {
      if (nbytes == 0) return DeviceBuffer(nullptr, 0, Device::kCpu);
      void* p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
      if (!p) return make_error("out of host memory allocating " + std::to_string(nbytes) + " bytes");
      return DeviceBuffer(std::shared_ptr<void>(p, &std::free), nbytes, Device::kCpu);
    }
    case Device::kCuda:
#if BEAMSERVE_CUDA
      return cuda::allocate(cuda_of(ctx, "allocate_buffer"), nbytes);
#else
      return make_error("CUDA memory requested but the CUDA backend is not built (configure with -DBEAMSERVE_CUDA=ON)");
#endif
  }
  return make_error("unknown device");
}

void copy_tensor(const KernelContext& ctx, const TensorView& dst, const TensorView& src) {
  BEAM_CHECK(dst.dtype == src.dtype && dst.numel() == src.numel())
      << "copy_tensor: " << dtype_name(src.dtype) << src.shape.str() << " into "
      << dtype_name(dst.dtype) << dst.shape.str();
  if (dst.device == Device::kCpu && src.device == Device::kCpu) {
    if (dst.data != src.data && src.nbytes() > 0) std::memmove(dst.data, src.data, src.nbytes());
    return;
  }
#if BEAMSERVE_CUDA
  cuda::copy(cuda_of(ctx, "copy_tensor"), dst.data, dst.device, src.data, src.device, src.nbytes());
#else
  BEAM_CHECK(false) << "copy_tensor: CUDA memory but the CUDA backend is not built";
#endif
}

void copy_rows(const KernelContext& ctx, const PitchedRows& dst, const PitchedRows& src) {
  BEAM_CHECK(dst.row_bytes == src.row_bytes && dst.rows == src.rows && dst.pitch >= dst.row_bytes &&
             src.pitch >= src.row_bytes)
      << "copy_rows: " << src.rows << " rows of " << src.row_bytes << " bytes (pitch " << src.pitch
      << ") into " << dst.rows << " of " << dst.row_bytes << " (pitch " << dst.pitch << ")";
  if (dst.rows == 0 || dst.row_bytes == 0) return;
  if (dst.device == Device::kCpu && src.device == Device::kCpu) {
    for (size_t i = 0; i < dst.rows; ++i)
      std::memmove(static_cast<char*>(dst.data) + i * dst.pitch,
                   static_cast<const char*>(src.data) + i * src.pitch, dst.row_bytes);
    return;
  }
#if BEAMSERVE_CUDA
  cuda::copy_2d(cuda_of(ctx, "copy_rows"), dst.data, dst.device, dst.pitch, src.data, src.device,
                src.pitch, dst.row_bytes, dst.rows);
#else
  BEAM_CHECK(false) << "copy_rows: CUDA memory but the CUDA backend is not built";
#endif
}

Expected<DeviceBuffer> allocate_pinned_host(const KernelContext& ctx, size_t nbytes) {
  switch (ctx.device) {
    case Device::kCpu: return allocate_buffer(ctx, nbytes);
    case Device::kCuda:
#if BEAMSERVE_CUDA
      return cuda::allocate_pinned(cuda_of(ctx, "allocate_pinned_host"), nbytes);
#else
      return make_error("pinned host memory requested but the CUDA backend is not built");
#endif
  }
  return make_error("unknown device");
}

void copy_rows_async(const KernelContext& ctx, const PitchedRows& dst, const PitchedRows& src) {
  if (ctx.device == Device::kCpu || (dst.device == Device::kCpu && src.device == Device::kCpu)) {
    copy_rows(ctx, dst, src);
    return;
  }
  BEAM_CHECK(dst.row_bytes == src.row_bytes && dst.rows == src.rows && dst.pitch >= dst.row_bytes &&
             src.pitch >= src.row_bytes)
      << "copy_rows_async: " << src.rows << " rows of " << src.row_bytes << " bytes (pitch "
      << src.pitch << ") into " << dst.rows << " of " << dst.row_bytes << " (pitch " << dst.pitch << ")";
  if (dst.rows == 0 || dst.row_bytes == 0) return;
#if BEAMSERVE_CUDA
  cuda::copy_2d_async(cuda_of(ctx, "copy_rows_async"), dst.data, dst.pitch, src.data, src.pitch,
                      dst.row_bytes, dst.rows);
#else
  BEAM_CHECK(false) << "copy_rows_async: CUDA memory but the CUDA backend is not built";
#endif
}

void zero_rows(const KernelContext& ctx, const PitchedRows& t) {
  BEAM_CHECK(t.pitch >= t.row_bytes)
      << "zero_rows: pitch " << t.pitch << " below the row's " << t.row_bytes << " bytes";
  if (t.rows == 0 || t.row_bytes == 0) return;
  switch (t.device) {
    case Device::kCpu:
      for (size_t i = 0; i < t.rows; ++i)
        std::memset(static_cast<char*>(t.data) + i * t.pitch, 0, t.row_bytes);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::zero_2d(cuda_of(ctx, "zero_rows"), t.data, t.pitch, t.row_bytes, t.rows);
#else
      BEAM_CHECK(false) << "zero_rows: CUDA memory but the CUDA backend is not built";
#endif
      return;
  }
}

void zero_tensor(const KernelContext& ctx, const TensorView& t) {
  if (t.nbytes() == 0) return;
  switch (t.device) {
    case Device::kCpu:
      std::memset(t.data, 0, t.nbytes());
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::zero(cuda_of(ctx, "zero_tensor"), t.data, t.nbytes());
#else
      BEAM_CHECK(false) << "zero_tensor: CUDA memory but the CUDA backend is not built";
#endif
      return;
  }
}

void synchronize(const KernelContext& ctx) {
#if BEAMSERVE_CUDA
  if (ctx.device == Device::kCuda) cuda::synchronize(cuda_of(ctx, "synchronize"));
#endif
}

void begin_step(const KernelContext& ctx) {
#if BEAMSERVE_CUDA
  if (ctx.device == Device::kCuda) cuda_of(ctx, "begin_step").staging.reset();
#endif
}

void begin_graph_capture(const KernelContext& ctx) {
  BEAM_CHECK(ctx.device == Device::kCuda) << "begin_graph_capture: CUDA graphs need Device::kCuda";
#if BEAMSERVE_CUDA
  cuda::begin_capture(cuda_of(ctx, "begin_graph_capture"));
#endif
}

Expected<StepGraph> end_graph_capture(const KernelContext& ctx) {
  BEAM_CHECK(ctx.device == Device::kCuda) << "end_graph_capture: CUDA graphs need Device::kCuda";
#if BEAMSERVE_CUDA
  return cuda::end_capture(cuda_of(ctx, "end_graph_capture"));
#else
  return make_error("end_graph_capture: the CUDA backend is not built");
#endif
}

void launch_graph(const KernelContext& ctx, const StepGraph& graph) {
  BEAM_CHECK(ctx.device == Device::kCuda && graph.valid()) << "launch_graph: no CUDA graph";
#if BEAMSERVE_CUDA
  cuda::launch(cuda_of(ctx, "launch_graph"), graph);
#endif
}

uint64_t graph_fingerprint(const KernelContext& ctx) {
#if BEAMSERVE_CUDA
  if (ctx.device == Device::kCuda) return cuda::fingerprint(cuda_of(ctx, "graph_fingerprint"));
#endif
  return 0;
}

int cuda_device_count() {
#if BEAMSERVE_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

void bind_calling_thread(const KernelContext& ctx) {
#if BEAMSERVE_CUDA
  if (ctx.device == Device::kCuda) cuda::bind_device(cuda_of(ctx, "bind_calling_thread"));
#else
  (void)ctx;
#endif
}

#if !BEAMSERVE_CUDA
Expected<std::shared_ptr<CudaContext>> create_cuda_context(int) {
  return make_error("this beamserve was built without the CUDA backend (configure with -DBEAMSERVE_CUDA=ON)");
}
void set_programmatic_launch(CudaContext&, bool) {}
bool programmatic_launch(const CudaContext&) { return false; }
#endif

DeviceMemoryInfo device_memory_info(const KernelContext& ctx) {
#if BEAMSERVE_CUDA
  if (ctx.device == Device::kCuda) {
    size_t free_bytes = 0, total_bytes = 0;
    cuda::memory_info(cuda_of(ctx, "device_memory_info"), &free_bytes, &total_bytes);
    return {static_cast<int64_t>(free_bytes), static_cast<int64_t>(total_bytes)};
  }
#endif
  return {};
}

std::string describe_device(const KernelContext& ctx) {
#if BEAMSERVE_CUDA
  if (ctx.device == Device::kCuda) return cuda::describe(cuda_of(ctx, "describe_device"));
#endif
  return "CPU";
}

void* native_stream(const KernelContext& ctx) {
#if BEAMSERVE_CUDA
  if (ctx.device == Device::kCuda) return cuda_of(ctx, "native_stream").stream;
#endif
  return nullptr;
}

}  // namespace beam
