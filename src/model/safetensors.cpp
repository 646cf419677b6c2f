// Safetensors header parsing: every check names the file and, where there is one, the tensor.
#include "model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

namespace beam {

using nlohmann::json;

namespace {

Error file_error(const MappedFile& file, const std::string& what) {
  return make_error(file.path() + ": " + what);
}

Error tensor_error(const MappedFile& file, const std::string& name, const std::string& what) {
  return make_error(file.path() + ": tensor '" + name + "' " + what);
}

// The header JSON object; rejects truncation, bad JSON, non-objects and duplicate names.
Expected<json> read_header_json(const MappedFile& file, size_t* data_begin) {
  if (file.size() < 8) {
    return file_error(file, "truncated: " + std::to_string(file.size()) +
                                " bytes, shorter than the 8-byte header length");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file.data()[i];  // little-endian u64
  if (n > file.size() - 8) {
    return file_error(file, "truncated: header length " + std::to_string(n) + " runs past the end of the " +
                                std::to_string(file.size()) + "-byte file");
  }
  if (n > kMaxSafetensorsHeaderBytes) {
    return file_error(file, "header length " + std::to_string(n) + " exceeds the " +
                                std::to_string(kMaxSafetensorsHeaderBytes) + "-byte limit");
  }
  std::string_view text(reinterpret_cast<const char*>(file.data()) + 8, n);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\0')) text.remove_suffix(1);
  std::set<std::string> seen;
  std::string duplicate;
  auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && !seen.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(text.begin(), text.end(), on_event);
  } catch (const json::exception& e) {
    return file_error(file, std::string("header is not valid JSON (") + e.what() + ")");
  }
  if (!header.is_object()) {
    return file_error(file, std::string("header must be a JSON object, got ") + header.type_name());
  }
  if (!duplicate.empty()) return tensor_error(file, duplicate, "is listed twice in the header");
  *data_begin = 8 + n;
  return header;
}

Expected<Shape> read_shape(const MappedFile& file, const std::string& name, const json& v) {
  if (!v.is_array()) return tensor_error(file, name, "has shape " + v.dump() + ", expected a list of integers");
  if (v.size() > static_cast<size_t>(kMaxDims)) {
    return tensor_error(file, name, "has rank " + std::to_string(v.size()) + "; at most " +
                                        std::to_string(kMaxDims) + " dimensions are supported");
  }
  Shape shape;
  for (const json& d : v) {
    if (!d.is_number_unsigned()) {
      return tensor_error(file, name, "has shape " + v.dump() + ": dimensions must be non-negative integers");
    }
    shape.dims[shape.rank++] = static_cast<int64_t>(std::min<uint64_t>(d.get<uint64_t>(), INT64_MAX));
  }
  return shape;
}

// Bytes of `shape` elements of `dtype`, or nullopt on overflow.
std::optional<uint64_t> byte_size(const Shape& shape, DType dtype) {
  uint64_t bytes = dtype_size(dtype);
  for (int i = 0; i < shape.rank; ++i) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(shape[i]), &bytes)) return std::nullopt;
  }
  return bytes;
}

Expected<RawTensor> read_entry(const MappedFile& file, const std::string& name, const json& e,
                               size_t data_begin) {
  if (!e.is_object()) return tensor_error(file, name, "entry must be an object, got " + e.dump());
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!e.contains(key)) return tensor_error(file, name, std::string("entry is missing '") + key + "'");
  }
  const json& dt = e["dtype"];
  if (!dt.is_string()) return tensor_error(file, name, "has dtype " + dt.dump() + ", expected a string");
  std::optional<DType> dtype = parse_safetensors_dtype(dt.get<std::string>());
  if (!dtype) {
    return tensor_error(file, name, "has unsupported dtype '" + dt.get<std::string>() +
                                        "' (supported: BF16, F16, F32)");
  }
  BEAM_ASSIGN_OR_RETURN(Shape shape, read_shape(file, name, e["shape"]));
  const json& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
    return tensor_error(file, name, "has data_offsets " + off.dump() + ", expected [begin, end] non-negative integers");
  }
  uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
  uint64_t data_len = file.size() - data_begin;
  if (end < begin) return tensor_error(file, name, "has data_offsets " + off.dump() + " with end < begin");
  if (end > data_len) {
    return tensor_error(file, name, "has data_offsets " + off.dump() + " past the end of the " +
                                        std::to_string(data_len) + "-byte data section (file truncated?)");
  }
  std::optional<uint64_t> expected = byte_size(shape, *dtype);
  if (!expected || *expected != end - begin) {
    return tensor_error(file, name, "spans " + std::to_string(end - begin) + " bytes but shape " + shape.str() +
                                        " x " + dt.get<std::string>() + " needs " +
                                        (expected ? std::to_string(*expected) : std::string("more than 2^64")));
  }
  return RawTensor{name, file.path(), *dtype, shape, file.data() + data_begin + begin, static_cast<size_t>(end - begin)};
}

// Tensors with bytes must not share any byte (tensors are sorted by data pointer here).
Status check_overlaps(const MappedFile& file, std::vector<const RawTensor*> tensors) {
  std::sort(tensors.begin(), tensors.end(), [](const RawTensor* a, const RawTensor* b) {
    return a->data < b->data;
  });
  const RawTensor* prev = nullptr;
  for (const RawTensor* t : tensors) {
    if (t->nbytes == 0) continue;
    if (prev && static_cast<const uint8_t*>(prev->data) + prev->nbytes > t->data) {
      return tensor_error(file, t->name, "overlaps tensor '" + prev->name + "' in the data section");
    }
    prev = t;
  }
  return ok_status();
}

}  // namespace

std::optional<DType> parse_safetensors_dtype(std::string_view name) {
  if (name == "BF16") return DType::kBF16;
  if (name == "F16") return DType::kF16;
  if (name == "F32") return DType::kF32;
  return std::nullopt;
}

std::string_view safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kF32: return "F32";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
    case DType::kU8: return "U8";
  }
  return "?";
}

Expected<std::vector<RawTensor>> read_safetensors(const MappedFile& file) {
  size_t data_begin = 0;
  BEAM_ASSIGN_OR_RETURN(json header, read_header_json(file, &data_begin));
  std::vector<RawTensor> tensors;
  tensors.reserve(header.size());
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;  // free-form; not needed to read tensors
    BEAM_ASSIGN_OR_RETURN(RawTensor t, read_entry(file, name, entry, data_begin));
    tensors.push_back(std::move(t));
  }
  std::vector<const RawTensor*> ptrs;
  for (const RawTensor& t : tensors) ptrs.push_back(&t);
  BEAM_RETURN_IF_ERROR(check_overlaps(file, std::move(ptrs)));
  return tensors;
}

}  // namespace beam
