// CUDA fill_random against the CPU fill: the same (seed, index) hash, so f32 values agree to fp32
// rounding and bf16 values to one bf16 step; odd sizes and a large tensor (grid-stride loop).
#include "kernels/api/fill.h"

#include "cuda_test_util.h"

namespace beam::test {
namespace {

class FillCuda : public CudaTest {};

TEST_F(FillCuda, MatchesCpuF32AndBf16) {
  for (int64_t n : {int64_t{1}, int64_t{1027}, int64_t{5} << 20}) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      HostTensor want(dt, {n});
      fill_random(cpu.two, want.view, 42, 0.02f, 1.0f);
      TensorView dev = device_tensor(dt, {n});
      fill_random(gpu, dev, 42, 0.02f, 1.0f);
      HostTensor got = download(dev);
      Diff d = compare(got.view, want.view);
      EXPECT_LE(d.rel, dt == DType::kF32 ? 1e-6 : 8e-3) << "n=" << n << " at " << d.worst;
    }
  }
}

}  // namespace
}  // namespace beam::test
