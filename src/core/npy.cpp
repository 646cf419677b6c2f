// .npy v1.0 codec: a magic string, a little-endian u16 header length, a Python-dict header
// padded with spaces to a multiple of 64 bytes, then the raw data.
#include "core/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace beam {
namespace {

size_t descr_size(const std::string& d) {
  if (d == "<f4" || d == "<i4") return 4;
  if (d == "<i8" || d == "<f8") return 8;
  if (d == "<u2" || d == "<f2") return 2;
  if (d == "|u1" || d == "|i1") return 1;
  return 0;
}

}  // namespace

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Status write_npy(const std::string& path, const std::string& descr,
                 const std::vector<int64_t>& shape, const void* data) {
  size_t esize = descr_size(descr);
  if (esize == 0) return make_error("write_npy: unsupported dtype " + descr);
  std::ostringstream h;
  h << "{'descr': '" << descr << "', 'fortran_order': False, 'shape': (";
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    h << shape[i] << (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
    n *= shape[i];
  }
  h << "), }";
  std::string header = h.str();
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream f(path, std::ios::binary);
  if (!f) return make_error("cannot open " + path + " for writing");
  const char magic[] = "\x93NUMPY\x01\x00";
  f.write(magic, 8);
  uint16_t len = static_cast<uint16_t>(header.size());
  f.write(reinterpret_cast<const char*>(&len), 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n * esize));
  if (!f) return make_error("write failed: " + path);
  return ok_status();
}

Status write_npy_f32(const std::string& path, const std::vector<int64_t>& shape,
                     const float* data) {
  return write_npy(path, "<f4", shape, data);
}

Expected<NpyArray> read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error("cannot open " + path);
  char magic[8];
  f.read(magic, 8);
  if (!f || std::memcmp(magic, "\x93NUMPY", 6) != 0) return make_error(path + ": not a .npy file");
  uint32_t hlen = 0;
  if (magic[6] == 1) {
    uint16_t l;
    f.read(reinterpret_cast<char*>(&l), 2);
    hlen = l;
  } else {
    f.read(reinterpret_cast<char*>(&hlen), 4);
  }
  std::string header(hlen, '\0');
  f.read(header.data(), hlen);
  if (!f) return make_error(path + ": truncated header");
  NpyArray out;
  auto field = [&](const std::string& key) -> std::string {
    size_t p = header.find("'" + key + "'");
    if (p == std::string::npos) return "";
    p = header.find(':', p);
    return header.substr(p + 1);
  };
  std::string d = field("descr");
  size_t q1 = d.find('\''), q2 = d.find('\'', q1 + 1);
  if (q1 == std::string::npos || q2 == std::string::npos) return make_error(path + ": no descr");
  out.descr = d.substr(q1 + 1, q2 - q1 - 1);
  if (field("fortran_order").find("True") < field("fortran_order").find(','))
    return make_error(path + ": Fortran order is not supported");
  std::string s = field("shape");
  size_t o = s.find('('), c = s.find(')');
  std::stringstream dims(s.substr(o + 1, c - o - 1));
  std::string tok;
  while (std::getline(dims, tok, ',')) {
    if (tok.find_first_not_of(" ") == std::string::npos) continue;
    out.shape.push_back(std::stoll(tok));
  }
  size_t esize = descr_size(out.descr);
  if (esize == 0) return make_error(path + ": unsupported dtype " + out.descr);
  out.data.resize(static_cast<size_t>(out.numel()) * esize);
  f.read(out.data.data(), static_cast<std::streamsize>(out.data.size()));
  if (!f) return make_error(path + ": truncated data");
  return out;
}

}  // namespace beam
