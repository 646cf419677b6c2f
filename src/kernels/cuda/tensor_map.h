// Host side of TMA (the bulk tensor copy engine): encoding bf16 tensor maps through the driver's
// cuTensorMapEncodeTiled, reached through the runtime (no -lcuda link).
#pragma once

#include <cuda.h>

namespace beam::cuda {

using TensorMapEncoder = decltype(&cuTensorMapEncodeTiled);

// The driver's cuTensorMapEncodeTiled, nullptr if the driver lacks it.
TensorMapEncoder tensor_map_encoder();

// A bf16 tensor map over `rank` dims (innermost first, strides in bytes of dims 1..rank-1, box in
// elements) whose boxes land in shared memory with `swizzle` (the box's inner dimension as wide
// as the swizzle span: 128 bytes for SWIZZLE_128B, 64 for SWIZZLE_64B); out-of-bounds elements
// load as zeros. False if the driver refuses it.
bool encode_bf16_map(TensorMapEncoder encode, CUtensorMap& map, const void* data, cuuint32_t rank,
                     const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                     CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B);

}  // namespace beam::cuda
