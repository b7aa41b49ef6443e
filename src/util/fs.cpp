#include "util/fs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace ft {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  tmp_ = fmt::format("{}.tmp.{}", path_, ::getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw Error(fmt::format("cannot create {}: {}", tmp_, std::strerror(errno)),
                "check that the directory exists and is writable");
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("writing {}: {}", tmp_, std::strerror(errno)),
                  errno == ENOSPC ? "the disk is full; free space and retry" : "");
    }
    p += n;
    bytes -= static_cast<size_t>(n);
    written_ += static_cast<uint64_t>(n);
  }
}

void AtomicFile::write_at(uint64_t offset, const void* data, size_t bytes) {
  FT_CHECK(offset + bytes <= written_, "write_at past the end of {}", tmp_);
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::pwrite(fd_, p, bytes, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("writing {}: {}", tmp_, std::strerror(errno)));
    }
    p += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) {
    throw Error(fmt::format("fsync {}: {}", tmp_, std::strerror(errno)));
  }
  ::close(fd_);
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    throw Error(fmt::format("rename {} -> {}: {}", tmp_, path_, std::strerror(errno)));
  }
  committed_ = true;
  fsync_dir(std::filesystem::path(path_).parent_path().string());
}

void write_file_atomic(const std::string& path, std::string_view contents) {
  AtomicFile f(path);
  f.write(contents);
  f.commit();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error(fmt::format("cannot open {}: {}", path, std::strerror(errno)), "check the path and its permissions");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace ft
