// Element types of tensors on disk and in memory.
#pragma once

#include <cstddef>
#include <string_view>

namespace beam {

enum class DType { kBF16, kF16, kF32, kI32, kI64, kU8 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kF32: return 4;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kF32: return "f32";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU8: return "u8";
  }
  return "?";
}

}  // namespace beam
