// MappedFile implementation (open + fstat + mmap PROT_READ, MAP_PRIVATE, the descriptor kept for
// pread; or read into owned bytes).
#include "model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace beam {
namespace {

// An open regular file and its size; closes the descriptor when it goes (unless released).
struct OpenFile {
  int fd = -1;
  size_t size = 0;
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
  }
  int release() { return std::exchange(fd, -1); }
};

// Opens `path` read-only, checking that it is a regular file; errors name the path and why.
Status open_regular(const std::string& path, OpenFile& file) {
  file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file.fd < 0) return make_error(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(file.fd, &st) != 0)
    return make_error(path + ": cannot stat (" + std::strerror(errno) + ")");
  if (!S_ISREG(st.st_mode)) return make_error(path + ": not a regular file");
  file.size = static_cast<size_t>(st.st_size);
  return ok_status();
}

}  // namespace

Expected<std::shared_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  OpenFile file;
  BEAM_RETURN_IF_ERROR(open_regular(path, file));
  const uint8_t* data = nullptr;
  if (file.size > 0) {
    void* p = ::mmap(nullptr, file.size, PROT_READ, MAP_PRIVATE, file.fd, 0);
    if (p == MAP_FAILED)
      return make_error(path + ": cannot mmap " + std::to_string(file.size) + " bytes (" +
                        std::strerror(errno) + ")");
    data = static_cast<const uint8_t*>(p);
  }
  return std::shared_ptr<MappedFile>(new MappedFile(path, data, file.size, file.release()));
}

Expected<std::shared_ptr<MappedFile>> MappedFile::copy_of(const std::string& path) {
  OpenFile file;
  BEAM_RETURN_IF_ERROR(open_regular(path, file));
  auto bytes = std::make_unique_for_overwrite<uint8_t[]>(file.size);
  for (size_t got = 0; got < file.size;) {
    const ssize_t n = ::read(file.fd, bytes.get() + got, file.size - got);
    if (n <= 0)
      return make_error(path + ": read " + std::to_string(got) + " of " +
                        std::to_string(file.size) + " bytes (" +
                        (n == 0 ? std::string("the file shrank") : std::strerror(errno)) + ")");
    got += static_cast<size_t>(n);
  }
  std::shared_ptr<MappedFile> copy(
      new MappedFile(path, file.size > 0 ? bytes.get() : nullptr, file.size));
  copy->owned_ = std::move(bytes);
  return copy;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr && owned_ == nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

Status MappedFile::check_whole() const {
  if (fd_ < 0) return ok_status();
  struct stat st {};
  if (::fstat(fd_, &st) != 0)
    return make_error(path_ + ": cannot stat (" + std::strerror(errno) + ")");
  if (static_cast<size_t>(st.st_size) < size_)
    return make_error(path_ + ": the file was cut short while in use (" +
                      std::to_string(st.st_size) + " of its " + std::to_string(size_) + " bytes)");
  return ok_status();
}

Status MappedFile::read_at(size_t offset, void* out, size_t n) const {
  if (offset > size_ || n > size_ - offset)
    return make_error(path_ + ": bytes [" + std::to_string(offset) + ", " +
                      std::to_string(offset + n) + ") are past its " + std::to_string(size_));
  if (fd_ < 0) {  // copy_of's bytes (or an empty file)
    if (n > 0) std::memcpy(out, data_ + offset, n);
    return ok_status();
  }
  auto* dst = static_cast<uint8_t*>(out);
  for (size_t got = 0; got < n;) {
    const ssize_t r = ::pread(fd_, dst + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return make_error(path_ + ": read " + std::to_string(got) + " of " + std::to_string(n) +
                        " bytes at " + std::to_string(offset) + " (" +
                        (r == 0 ? std::string("the file was cut short while in use")
                                : std::string(std::strerror(errno))) +
                        ")");
    got += static_cast<size_t>(r);
  }
  return ok_status();
}

}  // namespace beam
