#include "data/loader/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace ft {

TokenFile::TokenFile(const std::string& path, const std::string& dtype) : path_(path) {
  width_ = dtype == "u32" ? 4 : 2;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw Error(fmt::format("token file {}: {}", path, std::strerror(errno)),
                "set data.path to an existing file of uint16/uint32 token ids");
  }
  struct stat st {};
  ::fstat(fd, &st);
  bytes_ = static_cast<size_t>(st.st_size);
  if (bytes_ == 0 || bytes_ % static_cast<size_t>(width_) != 0) {
    ::close(fd);
    throw Error(fmt::format("token file {} is truncated or empty: {} bytes is not a whole number of {} tokens", path,
                            bytes_, dtype),
                "regenerate the file, or set data.token_dtype to match how it was written");
  }
  data_ = ::mmap(nullptr, bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (data_ == MAP_FAILED) {
    data_ = nullptr;
    throw Error(fmt::format("token file {}: mmap failed: {}", path, std::strerror(errno)));
  }
  n_ = static_cast<int64_t>(bytes_ / static_cast<size_t>(width_));
}

TokenFile::~TokenFile() {
  if (data_) ::munmap(const_cast<void*>(data_), bytes_);
}

int32_t TokenFile::at(int64_t i) const {
  if (width_ == 2) return static_cast<const uint16_t*>(data_)[i];
  return static_cast<int32_t>(static_cast<const uint32_t*>(data_)[i]);
}

uint32_t TokenFile::max_token() const {
  uint32_t mx = 0;
  for (int64_t i = 0; i < n_; ++i) mx = std::max(mx, static_cast<uint32_t>(at(i)));
  return mx;
}

}  // namespace ft
