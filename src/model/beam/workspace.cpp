// ScratchBuffer growth policy: reallocate only when a view needs more bytes than held (×1.5).
#include "model/beam/workspace.h"

namespace beam {

TensorView ScratchBuffer::view(DType dtype, Shape shape) {
  size_t need = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  if (need > buffer_.nbytes()) buffer_ = Buffer(need + need / 2);
  return buffer_.view(dtype, shape);
}

}  // namespace beam
