// Host side of TMA (the bulk tensor copy engine): encoding bf16 tensor maps through the driver's
// cuTensorMapEncodeTiled, reached through the runtime (no -lcuda link).
#pragma once

#include <cuda.h>

namespace beam::cuda {

using TensorMapEncoder = decltype(&cuTensorMapEncodeTiled);

// The driver's cuTensorMapEncodeTiled, nullptr if the driver lacks it.
TensorMapEncoder tensor_map_encoder();

// A bf16 tensor map with 128-byte swizzle over `rank` dims (innermost first, strides in bytes of
// dims 1..rank-1, box in elements; the box's inner dimension 128 bytes wide, the swizzle span: a
// narrower one does not land as 128-byte rows, H200 run 99); out-of-bounds elements load as
// zeros. False if the driver refuses it.
bool encode_bf16_map(TensorMapEncoder encode, CUtensorMap& map, const void* data, cuuint32_t rank,
                     const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box);

}  // namespace beam::cuda
