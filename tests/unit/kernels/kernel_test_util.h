// Helpers for the kernel tests: random bf16/f32 tensors, CPU contexts with 1 or 2 threads, and
// comparisons that report the worst element.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "core/npy.h"
#include "kernels/api/context.h"

namespace beam::test {

// One-thread and two-thread CPU contexts (results must be identical between them).
struct Contexts {
  ThreadPool pool1{1};
  ThreadPool pool2{2};
  KernelContext one{Device::kCpu, &pool1};
  KernelContext two{Device::kCpu, &pool2};
};

inline HostTensor random_bf16(Shape shape, std::mt19937& rng, float stddev = 1.0f, float mean = 0.0f) {
  HostTensor t(DType::kBF16, shape);
  std::normal_distribution<float> dist(mean, stddev);
  for (int64_t i = 0; i < t.view.numel(); ++i) t.as<bf16>()[i] = to_bf16(dist(rng));
  return t;
}

inline HostTensor random_f32(Shape shape, std::mt19937& rng, float stddev = 1.0f) {
  HostTensor t(DType::kF32, shape);
  std::normal_distribution<float> dist(0.0f, stddev);
  for (int64_t i = 0; i < t.view.numel(); ++i) t.as<float>()[i] = dist(rng);
  return t;
}

inline HostTensor copy_of(const HostTensor& src) {
  HostTensor t(src.view.dtype, src.view.shape);
  std::memcpy(t.view.data, src.view.data, src.view.nbytes());
  return t;
}

// Element i of a bf16 or f32 tensor as float.
inline float value_at(const TensorView& t, int64_t i) {
  return t.dtype == DType::kBF16 ? to_float(t.as<bf16>()[i]) : t.as<float>()[i];
}

inline bool bits_equal(const TensorView& a, const TensorView& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data, b.data, a.nbytes()) == 0;
}

// Distance in bf16 ulps between two bf16 values (same sign assumed for small distances).
inline int bf16_ulps(float a, float b) {
  auto key = [](float f) {
    int32_t bits = to_bf16(f).bits;
    return bits & 0x8000 ? -(bits & 0x7fff) : bits;
  };
  return std::abs(key(a) - key(b));
}

// A table from tests/data/kernels (written by make_torch_tables.py); fails the test if missing.
inline NpyArray load_table(const std::string& name, const std::string& descr) {
  const std::string path = std::string(BEAMSERVE_SOURCE_DIR) + "/tests/data/kernels/" + name;
  Expected<NpyArray> a = read_npy(path);
  EXPECT_TRUE(a.ok()) << (a.ok() ? "" : a.error().message);
  if (!a.ok()) return {};
  EXPECT_EQ(a->descr, descr) << path;
  return std::move(a).value();
}

}  // namespace beam::test
