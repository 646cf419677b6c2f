// Safetensors single-file format: header parsing and validation against the mapped bytes.
// Format: u64 little-endian header length N, N bytes of JSON {name: {dtype, shape,
// data_offsets: [begin, end]}, "__metadata__": {...}}, then the data section.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "model/mapped_file.h"

namespace beam {

// One tensor of a checkpoint, borrowed from a mapped file (valid while the file stays mapped).
// `data` is not necessarily aligned to the element size.
struct RawTensor {
  std::string name;
  std::string file;  // path of the file holding it
  DType dtype = DType::kF32;
  Shape shape;
  const void* data = nullptr;
  size_t nbytes = 0;
};

// Headers larger than this are rejected as corrupt (the reference implementation's limit).
inline constexpr size_t kMaxSafetensorsHeaderBytes = 100'000'000;

// Parses the header of `file` and checks every entry: known dtype (BF16, F16, F32), shape,
// offsets inside the data section, byte size = numel x dtype size, no overlaps, no duplicate
// names. Tensor order, header padding and __metadata__ do not matter.
Expected<std::vector<RawTensor>> read_safetensors(const MappedFile& file);

// "BF16" → kBF16, "F16" → kF16, "F32" → kF32; nullopt for any other safetensors dtype.
std::optional<DType> parse_safetensors_dtype(std::string_view name);
// The safetensors spelling of a dtype this reader supports ("BF16", "F16", "F32").
std::string_view safetensors_dtype_name(DType dtype);

}  // namespace beam
