// NumPy .npy (format version 1.0) reading and writing for little-endian f32/i32/i64/bf16-as-u2 arrays.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace beam {

struct NpyArray {
  std::string descr;           // numpy dtype string, e.g. "<f4", "<i4", "<i8"
  std::vector<int64_t> shape;  // C order
  std::vector<char> data;      // raw little-endian elements

  int64_t numel() const;
  template <typename T>
  const T* as() const {
    return reinterpret_cast<const T*>(data.data());
  }
};

// Writes a C-order array; descr must be "<f4", "<i4" or "<i8".
Status write_npy(const std::string& path, const std::string& descr,
                 const std::vector<int64_t>& shape, const void* data);
Status write_npy_f32(const std::string& path, const std::vector<int64_t>& shape,
                     const float* data);
Expected<NpyArray> read_npy(const std::string& path);

}  // namespace beam
