#include "util/unused_path.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/error.h"

namespace fs = std::filesystem;

namespace ft {
namespace {

std::string numbered(const std::string& base, int i) {
  return i == 1 ? base : fmt::format("{}-{}", base, i);
}

}  // namespace

std::string unused_path(const std::string& base) {
  for (int i = 1;; ++i) {
    std::error_code ec;
    std::string path = numbered(base, i);
    if (fs::symlink_status(path, ec).type() == fs::file_type::not_found) return path;
  }
}

std::string create_unused_dir(const std::string& base) {
  for (int i = 1;; ++i) {
    std::string path = numbered(base, i);
    if (::mkdir(path.c_str(), 0755) == 0) return path;
    if (errno != EEXIST)
      throw Error(fmt::format("cannot create {}: {}", path, std::strerror(errno)),
                  "check that its parent directory exists and is writable");
  }
}

}  // namespace ft
