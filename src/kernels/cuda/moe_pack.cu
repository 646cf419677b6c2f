// pack_expert_weights on CUDA: row-major expert weights into moe_packed.cuh's layout, in place,
// a chunk of experts at a time through a temporary buffer (the packed matrix has the row-major
// one's size, so expert e keeps its place).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/check.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/moe.h"
#include "kernels/cuda/moe_packed.cuh"

namespace beam::cuda {
namespace {

constexpr int kPackThreads = 256;
constexpr size_t kChunkBytes = size_t{256} << 20;  // experts packed per pass: ~256 MB of them

// dst (packed) = src (row-major) for `experts` experts of [rows, k]; one thread per 16 bytes of
// dst (8 elements of one tile row's packed step, contiguous in both layouts).
__global__ void __launch_bounds__(kPackThreads)
    pack_kernel(const __nv_bfloat16* src, __nv_bfloat16* dst, bool swiglu, int64_t n, int64_t rows,
                int64_t k, int64_t chunks) {
  const int64_t per_expert = rows * k;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * kPackThreads + threadIdx.x; c < chunks;
       c += static_cast<int64_t>(gridDim.x) * kPackThreads) {
    const int64_t at = c * 8, e = at / per_expert, within = at % per_expert;
    const int64_t step = within / moe_packed::kStepElems;  // tile m's packed step s
    const int in_step = static_cast<int>(within % moe_packed::kStepElems);
    const int64_t steps = k / moe_packed::kStepCols, m = step / steps, s = step % steps;
    const int i = in_step / moe_packed::kStepCols;
    const int64_t row = moe_packed::logical_row(swiglu, n, m, i);
    const int64_t col = s * moe_packed::kStepCols + in_step % moe_packed::kStepCols;
    *reinterpret_cast<uint4*>(dst + at) =
        *reinterpret_cast<const uint4*>(src + e * per_expert + row * k + col);
  }
}

}  // namespace

Status pack_expert_weights(CudaContext& ctx, ExpertMatrix which, const TensorView& w) {
  const bool swiglu = which == ExpertMatrix::kGateUp;
  const int64_t E = w.dim(0), rows = w.dim(1), k = w.dim(2);
  const int64_t H = swiglu ? k : rows, I = swiglu ? rows / 2 : k;
  if (!moe_packed::packed_widths(H, I) || w.numel() == 0) return ok_status();
  const int64_t expert_bytes = rows * k * static_cast<int64_t>(sizeof(__nv_bfloat16));
  const int64_t per_pass =
      std::clamp<int64_t>(static_cast<int64_t>(kChunkBytes) / expert_bytes, 1, E);
  Expected<DeviceBuffer> temp = allocate(ctx, static_cast<size_t>(per_pass * expert_bytes));
  if (!temp.ok())
    return make_error("pack_expert_weights: a " + std::to_string(per_pass * expert_bytes) +
                      "-byte temporary: " + temp.error().message);
  auto* base = static_cast<__nv_bfloat16*>(w.data);
  auto* packed = static_cast<__nv_bfloat16*>(temp->data());
  const int64_t n = swiglu ? I : H;
  for (int64_t e0 = 0; e0 < E; e0 += per_pass) {
    const int64_t experts = std::min(per_pass, E - e0);
    const int64_t chunks = experts * rows * k / 8;
    const auto blocks =
        static_cast<unsigned>(std::min<int64_t>((chunks + kPackThreads - 1) / kPackThreads, 65535));
    __nv_bfloat16* src = base + e0 * rows * k;
    pack_kernel<<<blocks, kPackThreads, 0, ctx.stream>>>(src, packed, swiglu, n, rows, k, chunks);
    CUDA_LAUNCH_OK();
    CUDA_OK(cudaMemcpyAsync(src, packed, static_cast<size_t>(experts * expert_bytes),
                            cudaMemcpyDeviceToDevice, ctx.stream));
  }
  synchronize(ctx);  // the temporary is freed on return
  return ok_status();
}

void read_expert_rows(CudaContext& ctx, ExpertMatrix which, const TensorView& w, int64_t expert,
                      int64_t first, int64_t count, uint16_t* out) {
  const bool swiglu = which == ExpertMatrix::kGateUp;
  const int64_t rows = w.dim(1), k = w.dim(2);
  const int64_t H = swiglu ? k : rows, I = swiglu ? rows / 2 : k;
  const auto* block = static_cast<const uint16_t*>(w.data) + expert * rows * k;
  std::vector<uint16_t> host(static_cast<size_t>(rows * k));
  CUDA_OK(cudaMemcpyAsync(host.data(), block, host.size() * sizeof(uint16_t),
                          cudaMemcpyDeviceToHost, ctx.stream));
  synchronize(ctx);
  const bool packed = moe_packed::packed_widths(H, I);
  const int64_t n = swiglu ? I : H;
  for (int64_t r = 0; r < count; ++r) {
    const int64_t row = first + r;
    uint16_t* dst = out + r * k;
    if (!packed) {
      std::copy(host.begin() + row * k, host.begin() + (row + 1) * k, dst);
      continue;
    }
    int64_t m = 0;
    int i = 0;
    moe_packed::tile_of_row(swiglu, n, row, m, i);
    for (int64_t s = 0; s < k; s += moe_packed::kStepCols) {
      const uint16_t* src = host.data() + moe_packed::offset(k, m, i, s);
      std::copy(src, src + moe_packed::kStepCols, dst + s);
    }
  }
}

}  // namespace beam::cuda
