// convert_elements: per-element widening/rounding with memcpy loads (no unaligned accesses).
#include "model/tensor_convert.h"

#include <cstring>

#include "core/bf16.h"
#include "core/check.h"

namespace beam {

namespace {

// Element i of a float-typed source array, widened to f32 exactly.
template <DType kSrc>
inline float load_f32(const unsigned char* src, int64_t i) {
  if constexpr (kSrc == DType::kF32) {
    float v;
    std::memcpy(&v, src + 4 * i, 4);
    return v;
  } else {
    uint16_t bits;
    std::memcpy(&bits, src + 2 * i, 2);
    if constexpr (kSrc == DType::kBF16) return to_float(bf16::from_bits(bits));
    else return to_float(f16{bits});
  }
}

template <DType kSrc>
void convert_from(const unsigned char* src, int64_t n, void* dst, DType dst_dtype) {
  if (dst_dtype == DType::kF32) {
    auto* out = static_cast<float*>(dst);
    for (int64_t i = 0; i < n; ++i) out[i] = load_f32<kSrc>(src, i);
    return;
  }
  BEAM_CHECK(dst_dtype == DType::kBF16) << "convert to " << dtype_name(dst_dtype);
  auto* out = static_cast<bf16*>(dst);
  for (int64_t i = 0; i < n; ++i) out[i] = to_bf16(load_f32<kSrc>(src, i));
}

}  // namespace

void convert_elements(const void* src, DType src_dtype, int64_t n, void* dst, DType dst_dtype) {
  if (n == 0) return;
  const auto* bytes = static_cast<const unsigned char*>(src);
  if (src_dtype == dst_dtype) {
    std::memcpy(dst, src, static_cast<size_t>(n) * dtype_size(src_dtype));
    return;
  }
  switch (src_dtype) {
    case DType::kBF16: return convert_from<DType::kBF16>(bytes, n, dst, dst_dtype);
    case DType::kF16: return convert_from<DType::kF16>(bytes, n, dst, dst_dtype);
    case DType::kF32: return convert_from<DType::kF32>(bytes, n, dst, dst_dtype);
    case DType::kI32:
    case DType::kI64:
    case DType::kU8:
      BEAM_CHECK(false) << "convert_elements from " << dtype_name(src_dtype);
  }
}

}  // namespace beam
