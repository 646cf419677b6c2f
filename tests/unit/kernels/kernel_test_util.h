// Helpers for the kernel tests: random bf16/f32 tensors, CPU contexts with 1 or 2 threads, and
// comparisons that report the worst element.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/bf16.h"
#include "core/npy.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/api/context.h"

namespace beam::test {

// Tests at Beam's full widths run in optimized builds only: in Debug/sanitizer builds their
// unoptimized double-precision references take minutes (the same code paths run at tiny shapes).
#ifdef NDEBUG
inline constexpr bool kOptimizedBuild = true;
#else
inline constexpr bool kOptimizedBuild = false;
#endif
#define BEAM_SKIP_UNLESS_OPTIMIZED() \
  if (!::beam::test::kOptimizedBuild) GTEST_SKIP() << "Beam-width case: optimized builds only"

// One-thread and two-thread CPU contexts (results must be identical between them).
struct Contexts {
  ThreadPool pool1{1};
  ThreadPool pool2{2};
  KernelContext one{Device::kCpu, &pool1};
  KernelContext two{Device::kCpu, &pool2};
};

inline HostTensor random_bf16(Shape shape, std::mt19937& rng, float stddev = 1.0f,
                              float mean = 0.0f) {
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

// A copy of src with the rows of its first dimension in reverse order.
inline HostTensor reversed_rows(const HostTensor& src) {
  HostTensor t(src.view.dtype, src.view.shape);
  const auto rows = static_cast<size_t>(src.view.dim(0));
  const size_t bytes = rows > 0 ? src.view.nbytes() / rows : 0;
  const auto* from = static_cast<const char*>(src.view.data);
  auto* to = static_cast<char*>(t.view.data);
  for (size_t r = 0; r < rows; ++r)
    std::memcpy(to + (rows - 1 - r) * bytes, from + r * bytes, bytes);
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

// Fast uniform fill in [-scale, scale) for large tensors (bf16 or f32): xorshift values with a
// period of 1,000,003 elements (prime, so rows of any power-of-two width differ).
inline void fill_uniform(const TensorView& t, uint64_t seed, float scale) {
  constexpr int64_t kPeriod = 1000003;
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  const int64_t n = t.numel(), first = std::min(n, kPeriod);
  const size_t esize = dtype_size(t.dtype);
  for (int64_t i = 0; i < first; ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    const float u = static_cast<float>(s >> 40) / static_cast<float>(1ull << 24);  // [0, 1)
    const float v = (2.0f * u - 1.0f) * scale;
    if (t.dtype == DType::kBF16) {
      t.as<bf16>()[i] = to_bf16(v);
    } else {
      t.as<float>()[i] = v;
    }
  }
  char* base = static_cast<char*>(t.data);
  for (int64_t i = first; i < n; i += kPeriod)
    std::memcpy(base + i * esize, base, static_cast<size_t>(std::min(kPeriod, n - i)) * esize);
}

// Row r of a bf16 or f32 matrix [rows, n] widened to fp32.
inline std::vector<float> row_f32(const TensorView& t, int64_t r) {
  const int64_t n = t.numel() / t.dim(0);
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = value_at(t, r * n + i);
  return out;
}

// The fp32 dot-product order documented in kernels/cpu/vec.h, written out plainly: 8 lanes of
// fused multiply-adds over k < K8, lanes summed ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), then the
// tail with fused multiply-adds.
template <typename W>
float documented_dot(const float* x, const W* w, int64_t K) {
  auto wf = [](W v) {
    if constexpr (std::is_same_v<W, bf16>) {
      return to_float(v);
    } else {
      return v;
    }
  };
  const int64_t K8 = K & ~int64_t{7};
  float lane[8] = {};
  for (int64_t k = 0; k < K8; k += 8)
    for (int l = 0; l < 8; ++l) lane[l] = std::fma(x[k + l], wf(w[k + l]), lane[l]);
  float s =
      ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
  for (int64_t k = K8; k < K; ++k) s = std::fma(x[k], wf(w[k]), s);
  return s;
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
