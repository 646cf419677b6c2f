// TensorView: a borrowed, contiguous, row-major view of typed memory on one device.
// Buffer: owning, 64-byte-aligned host memory. Shapes are written [dim0, dim1, ...].
#pragma once

#include <array>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>

#include "core/check.h"
#include "core/dtype.h"

namespace beam {

enum class Device { kCpu, kCuda };

inline constexpr int kMaxDims = 4;

struct Shape {
  std::array<int64_t, kMaxDims> dims{};
  int rank = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d) {
    BEAM_CHECK(d.size() <= kMaxDims) << "rank " << d.size();
    for (int64_t v : d) dims[rank++] = v;
  }
  int64_t operator[](int i) const { return dims[i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  bool operator==(const Shape& o) const {
    if (rank != o.rank) return false;
    for (int i = 0; i < rank; ++i)
      if (dims[i] != o.dims[i]) return false;
    return true;
  }
  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "]";
  }
};

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;
  Device device = Device::kCpu;

  int64_t numel() const { return shape.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  int64_t dim(int i) const { return shape[i]; }
  int rank() const { return shape.rank; }

  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
  // Rows [begin, begin+count) of the leading dimension.
  TensorView rows(int64_t begin, int64_t count) const {
    BEAM_CHECK(rank() >= 1 && begin >= 0 && begin + count <= shape[0])
        << "rows " << begin << "+" << count << " of " << shape.str();
    TensorView v = *this;
    v.shape.dims[0] = count;
    int64_t row_elems = shape[0] == 0 ? 0 : numel() / shape[0];
    v.data = static_cast<char*>(data) + begin * row_elems * static_cast<int64_t>(dtype_size(dtype));
    return v;
  }
  TensorView reshape(Shape s) const {
    BEAM_CHECK(s.numel() == numel()) << "reshape " << shape.str() << " to " << s.str();
    TensorView v = *this;
    v.shape = s;
    return v;
  }
};

// Owning, 64-byte aligned host allocation, typed by the views taken of it.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t nbytes)
      : nbytes_(nbytes),
        data_(nbytes ? std::aligned_alloc(64, (nbytes + 63) / 64 * 64) : nullptr, &std::free) {
    BEAM_CHECK(nbytes == 0 || data_) << "out of host memory allocating " << nbytes << " bytes";
  }
  void* data() const { return data_.get(); }
  size_t nbytes() const { return nbytes_; }
  TensorView view(DType dtype, Shape shape) const {
    BEAM_CHECK(static_cast<size_t>(shape.numel()) * dtype_size(dtype) <= nbytes_)
        << "view " << shape.str() << " exceeds buffer of " << nbytes_ << " bytes";
    return TensorView{data_.get(), dtype, shape, Device::kCpu};
  }

 private:
  size_t nbytes_ = 0;
  std::unique_ptr<void, decltype(&std::free)> data_{nullptr, &std::free};
};

// A Buffer together with the view that describes it.
struct HostTensor {
  Buffer buffer;
  TensorView view;

  HostTensor() = default;
  HostTensor(DType dtype, Shape shape)
      : buffer(static_cast<size_t>(shape.numel()) * dtype_size(dtype)),
        view(buffer.view(dtype, shape)) {}
  template <typename T>
  T* as() const {
    return view.as<T>();
  }
};

}  // namespace beam
