// MappedFile: a whole file mapped read-only into memory (POSIX mmap) with its descriptor kept for
// pread (read_at), both released on destruction, or (copy_of) read into memory of its own for
// files that may be rewritten while in use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace beam {

class MappedFile {
 public:
  // Maps `path` read-only. An empty file maps to size() == 0 and data() == nullptr.
  static Expected<std::shared_ptr<MappedFile>> open(const std::string& path);
  // Reads `path` into memory the object owns: a later rewrite or truncation of the file (an RL
  // loop saving a LoRA adapter to the same folder each step) cannot reach it, as it could a
  // mapping (SIGBUS past a truncated end).
  static Expected<std::shared_ptr<MappedFile>> copy_of(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Whether p points into the mapped (or copied) bytes.
  bool holds(const void* p) const {
    const auto* b = static_cast<const uint8_t*>(p);
    return data_ != nullptr && b >= data_ && b < data_ + size_;
  }
  // Bytes [offset, offset + n) of the file into out, read with pread from the descriptor kept
  // open since open() (copy_of: from its own bytes): unlike touching the mapping, a file cut short
  // meanwhile (a trainer rewriting its checkpoint) is an error naming it, not a SIGBUS.
  Status read_at(size_t offset, void* out, size_t n) const;
  // An error naming the file when it is now shorter than when it was opened (fstat).
  Status check_whole() const;

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size, int fd = -1)
      : path_(std::move(path)), data_(data), size_(size), fd_(fd) {}

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;  // a mapping's descriptor, kept for read_at (closed on destruction)
  std::unique_ptr<uint8_t[]> owned_;  // copy_of's bytes (data_ points into them); else a mapping
};

}  // namespace beam
