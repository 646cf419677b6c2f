// Host tensors converted on their way into a context's device memory: the one copy path of
// upload_weights and copy_weights_into (model/device_weights.h).
#pragma once

#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/api/context.h"
#include "model/mapped_file.h"

namespace beam {

// `numel` elements of src_dtype at src (host memory, any alignment) or, with `file`, at byte
// file_offset of that file (read with pread: a file cut short is an error, not a SIGBUS), that
// become dst_dtype at dst (memory of the context's device). The pairs convert_elements supports
// (model/tensor_convert.h).
struct HostPiece {
  const void* src = nullptr;
  DType src_dtype = DType::kBF16;
  int64_t numel = 0;
  void* dst = nullptr;
  DType dst_dtype = DType::kBF16;
  const MappedFile* file = nullptr;  // set: the bytes come from here, not src
  uint64_t file_offset = 0;
};

// Writes every piece and returns when all are in place. CPU: converted by a thread pool straight
// into dst. CUDA: converted by a thread pool into pinned staging in chunks of up to 16 MiB (slots
// sized to the largest), one group of chunks filling while the other copies on ctx's stream, so
// reading the host bytes (page faults of a mapped checkpoint among them) overlaps the transfers.
// A copy that takes longer than 10 s logs its progress every 10 s. Errors: staging the host
// cannot pin, a file piece that cannot be read (naming the file).
// Pieces must not overlap.
Status stream_pieces(const KernelContext& ctx, std::span<const HostPiece> pieces);

}  // namespace beam
