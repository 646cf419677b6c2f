// Element conversion of checkpoint data (any alignment) into bf16 or f32 host memory.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace beam {

// Converts `n` elements of `src_dtype` at `src` (unaligned allowed) into `dst_dtype` at `dst`.
// Supported: BF16/F16/F32 → BF16 (one round-to-nearest-even; bf16 → bf16 is a copy) and
// BF16/F16/F32 → F32 (exact). Other pairs are a bug (callers validate dtypes first).
void convert_elements(const void* src, DType src_dtype, int64_t n, void* dst, DType dst_dtype);

}  // namespace beam
