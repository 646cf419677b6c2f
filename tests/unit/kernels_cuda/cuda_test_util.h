// Helpers for the CUDA kernel tests: a fixture that owns a CUDA context (and skips, saying why,
// on machines without a GPU or builds without the backend), host <-> device tensor copies, and a
// relative-error comparison against the CPU reference op.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "../kernels/kernel_test_util.h"
#include "kernels/api/device_memory.h"
#include "kernels/api/moe.h"

namespace beam::test {

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto created = create_cuda_context(0);
    if (!created.ok()) GTEST_SKIP() << "no CUDA: " << created.error().message;
    cuda_ = std::move(created.value());
    gpu.device = Device::kCuda;
    gpu.cuda = cuda_.get();
  }

  // A device copy of a host tensor (kept alive by the fixture).
  TensorView upload(const TensorView& host) {
    DeviceBuffer b = must(allocate_buffer(gpu, host.nbytes()));
    TensorView d = b.view(host.dtype, host.shape);
    copy_tensor(gpu, d, host);
    owned_.push_back(b);
    return d;
  }
  TensorView upload(const HostTensor& host) { return upload(host.view); }
  // A device copy of routed-expert weights in the layout moe_experts reads there
  // (pack_expert_weights: packed k64 tiles for widths that are multiples of 64).
  TensorView upload_experts(const HostTensor& host, ExpertMatrix which) {
    const TensorView d = upload(host.view);
    const Status packed = pack_expert_weights(gpu, which, d);
    if (!packed.ok()) ADD_FAILURE() << packed.error().message;
    return d;
  }
  // An uninitialised device tensor, filled with NaN bytes so unwritten outputs are caught.
  TensorView device_tensor(DType dtype, Shape shape) {
    HostTensor nan(dtype, shape);
    std::memset(nan.view.data, 0xff, nan.view.nbytes());
    return upload(nan.view);
  }
  HostTensor download(const TensorView& dev) {
    HostTensor h(dev.dtype, dev.shape);
    copy_tensor(gpu, h.view, dev);
    return h;
  }

  template <typename T>
  static T must(Expected<T> e) {
    if (!e.ok()) ADD_FAILURE() << e.error().message;
    return std::move(e.value());
  }

  KernelContext gpu;
  Contexts cpu;

 private:
  std::shared_ptr<CudaContext> cuda_;
  std::vector<DeviceBuffer> owned_;
};

// max |a - b| / max(max |b|, tiny) over all elements of two host tensors (bf16 or f32), and the
// count of elements more than `ulps` bf16 ulps apart.
struct Diff {
  double rel = 0;
  int64_t far = 0;
  int64_t worst = -1;
};
inline Diff compare(const TensorView& got, const TensorView& want, int ulps = 1) {
  Diff d;
  double max_ref = 1e-30, max_err = 0;
  for (int64_t i = 0; i < want.numel(); ++i) max_ref = std::max(max_ref, double(std::fabs(value_at(want, i))));
  for (int64_t i = 0; i < want.numel(); ++i) {
    const float g = value_at(got, i), w = value_at(want, i);
    const double e = std::isnan(g) != std::isnan(w) ? INFINITY : std::fabs(double(g) - w);
    if (e > max_err) {
      max_err = e;
      d.worst = i;
    }
    if (bf16_ulps(g, w) > ulps || std::isnan(g) != std::isnan(w)) ++d.far;
  }
  d.rel = max_err / max_ref;
  return d;
}

// Fraction of elements whose bits are equal (bf16 or f32 tensors of the same shape).
inline double exact_fraction(const TensorView& got, const TensorView& want) {
  int64_t same = 0;
  const size_t es = dtype_size(want.dtype);
  for (int64_t i = 0; i < want.numel(); ++i)
    same += std::memcmp(got.as<char>() + i * es, want.as<char>() + i * es, es) == 0;
  return want.numel() == 0 ? 1.0 : double(same) / double(want.numel());
}

// The spacing of bf16 values at v's magnitude (that of the smallest subnormal below 2^-126).
inline double bf16_ulp(float v) {
  if (v == 0.0f) return std::ldexp(1.0, -133);
  int exponent = 0;
  std::frexp(std::fabs(v), &exponent);  // |v| in [2^(exponent-1), 2^exponent)
  return std::ldexp(1.0, std::max(exponent - 1, -126) - 7);
}

// The bf16 values one ulp either side of v (v itself first).
inline std::array<float, 3> bf16_neighbours(float v) {
  const uint16_t b = to_bf16(v).bits;
  if ((b & 0x7fff) == 0) return {v, to_float(bf16::from_bits(0x0001)), to_float(bf16::from_bits(0x8001))};
  return {v, to_float(bf16::from_bits(b + 1)), to_float(bf16::from_bits(b - 1))};
}

}  // namespace beam::test
