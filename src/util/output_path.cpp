#include "util/output_path.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "util/error.h"

namespace fs = std::filesystem;

namespace ft {
namespace {

fs::path resolved(const std::string& p) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(fs::absolute(p, ec), ec);
  if (ec) r = fs::absolute(p).lexically_normal();
  if (r.has_filename() == false && r.has_parent_path() && r != r.root_path()) r = r.parent_path();
  return r;
}

// The directory part of a glob before its first wildcard ("data/*/x.txt" → "data"); the path
// itself when it has none.
std::string glob_root(const std::string& in) {
  const size_t wild = in.find_first_of("*?[");
  if (wild == std::string::npos) return in;
  const size_t slash = in.rfind('/', wild);
  return slash == std::string::npos ? "." : in.substr(0, slash == 0 ? 1 : slash);
}

}  // namespace

bool path_within(const std::string& inner, const std::string& outer) {
  const fs::path i = resolved(inner), o = resolved(outer);
  auto oi = o.begin();
  auto ii = i.begin();
  for (; oi != o.end(); ++oi, ++ii) {
    if (oi->empty()) continue;  // a trailing separator
    if (ii == i.end() || *ii != *oi) return false;
  }
  return true;
}

bool file_starts_with(const std::string& path, const std::string& prefix) {
  std::ifstream in(path, std::ios::binary);
  std::string head(prefix.size(), '\0');
  return in.read(head.data(), static_cast<std::streamsize>(head.size())) && head == prefix;
}

bool is_mount_point(const std::string& dir) {
  struct stat self {
  }, parent{};
  const fs::path p = resolved(dir);
  if (::stat(p.c_str(), &self) != 0 || !S_ISDIR(self.st_mode)) return false;
  if (p == p.root_path()) return true;
  if (::stat(p.parent_path().c_str(), &parent) != 0) return false;
  return self.st_dev != parent.st_dev;
}

void check_not_an_input(const std::string& out, const std::vector<std::string>& inputs, const std::string& flag,
                        const std::string& kind) {
  for (const std::string& in : inputs) {
    if (in.rfind("s3://", 0) == 0 || in.empty()) continue;
    const std::string root = glob_root(in);
    const bool glob = root != in;
    std::string where;
    if (!glob && path_within(out, in) && path_within(in, out))
      where = "is also an input";
    else if (path_within(out, root))
      where = "is inside the input " + in;
    else if (path_within(in, out) || (glob && path_within(root, out)))
      where = "contains the input " + in;
    if (!where.empty()) {
      throw Error(
          fmt::format("{} {} {}", flag, out, where),
          fmt::format("write the {} outside its inputs: it would replace, or be read as, what it is made from", kind));
    }
  }
}

bool check_output_path(const std::string& out, const OutputRule& r) {
  check_not_an_input(out, r.inputs, r.flag, r.kind);
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(out, ec))) return false;
  if (r.renamed_into_place && is_mount_point(out)) {
    throw Error(fmt::format("{} {} is a mount point: the {} is built next to it and renamed into place, which a "
                            "mount point does not allow",
                            r.flag, out, r.kind),
                fmt::format("use a directory inside it, e.g. {} {}/{}", r.flag,
                            fs::path(out).lexically_normal().string(), r.kind == "dataset" ? "dataset" : "out"));
  }
  const bool empty_dir = fs::is_directory(out, ec) && fs::is_empty(out, ec);
  if (empty_dir) return true;
  const bool ours = r.is_ours && r.is_ours(out);
  if (!ours) {
    throw Error(fmt::format("{} {} already exists and is not a {}{}", r.flag, out, r.kind,
                            r.force ? ": --force only replaces a " + r.kind : ""),
                fmt::format("choose another {}, or move {} away yourself", r.flag, out));
  }
  if (!r.force && !r.replaces_own) {
    throw Error(fmt::format("{} {} already holds a {}", r.flag, out, r.kind),
                fmt::format("pass --force to replace it, or choose another {}", r.flag));
  }
  return true;
}

}  // namespace ft
