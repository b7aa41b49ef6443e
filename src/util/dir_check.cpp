#include "util/dir_check.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "util/error.h"

namespace fs = std::filesystem;

namespace ft {

void check_dir_writable(const std::string& dir, const std::string& what, const std::string& hint) {
  auto fail = [&](const std::string& cause) { throw Error(fmt::format("{} {}: {}", what, dir, cause), hint); };
  // The missing part of the path, innermost first, up to the nearest existing ancestor.
  std::vector<fs::path> missing;
  std::string path = dir.empty() ? "." : dir;
  while (path.size() > 1 && path.back() == '/') path.pop_back();  // runs/x/ is runs/x
  fs::path p = path;
  while (true) {
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    if (st.type() == fs::file_type::not_found) {
      missing.push_back(p);
      const fs::path parent = p.parent_path();
      if (parent.empty() || parent == p) {
        p = ".";
      } else {
        p = parent;
      }
      continue;
    }
    if (ec) fail(fmt::format("{}: {}", p.string(), ec.message()));  // a symbolic-link loop, no permission, ...
    if (st.type() != fs::file_type::directory)
      fail(p.string() == path ? "it is a file, not a directory"
                              : fmt::format("{} is a file, not a directory", p.string()));
    if (::access(p.c_str(), W_OK | X_OK) != 0)
      fail(fmt::format("{} is not writable: {}", p.string(), std::strerror(errno)));
    break;
  }
  // Created and removed again, outermost first: /proc/x exists as a name nowhere but mkdir says so.
  size_t made = 0;
  for (auto it = missing.rbegin(); it != missing.rend(); ++it, ++made) {
    if (::mkdir(it->c_str(), 0755) != 0) {
      const int err = errno;
      for (size_t i = 0; i < made; ++i) ::rmdir(missing[missing.size() - made + i].c_str());
      fail(fmt::format("cannot create {}: {}", it->string(), std::strerror(err)));
    }
  }
  for (size_t i = 0; i < made; ++i) ::rmdir(missing[i].c_str());
}

}  // namespace ft
