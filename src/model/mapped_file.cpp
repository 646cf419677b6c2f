// MappedFile implementation (open + fstat + mmap PROT_READ, MAP_PRIVATE; or read into owned bytes).
#include "model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace beam {

Expected<std::shared_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return make_error(path + ": cannot stat (" + std::strerror(err) + ")");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(path + ": not a regular file");
  }
  size_t size = static_cast<size_t>(st.st_size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return make_error(path + ": cannot mmap " + std::to_string(size) + " bytes (" +
                        std::strerror(err) + ")");
    }
    data = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping stays valid after close
  return std::shared_ptr<MappedFile>(new MappedFile(path, data, size));
}

Expected<std::shared_ptr<MappedFile>> MappedFile::copy_of(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return make_error(path + ": cannot stat (" + std::strerror(err) + ")");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(path + ": not a regular file");
  }
  const auto size = static_cast<size_t>(st.st_size);
  auto bytes = std::make_unique_for_overwrite<uint8_t[]>(size);
  size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd, bytes.get() + got, size - got);
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      return make_error(path + ": read " + std::to_string(got) + " of " + std::to_string(size) +
                        " bytes (" +
                        (n == 0 ? std::string("the file shrank") : std::strerror(err)) + ")");
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  std::shared_ptr<MappedFile> file(new MappedFile(path, size > 0 ? bytes.get() : nullptr, size));
  file->owned_ = std::move(bytes);
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr && owned_ == nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace beam
