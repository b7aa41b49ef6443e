#include "util/memory_limit.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "util/strings.h"

namespace ft {
namespace {

struct Mount {
  std::string root, point, type, options;
};

std::vector<Mount> cgroup_mounts() {
  std::vector<Mount> out;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    // id parent major:minor root mount-point options [optional...] - type source super-options
    std::istringstream ss(line);
    std::string id, parent, dev, root, point, opts, f;
    ss >> id >> parent >> dev >> root >> point >> opts;
    while (ss >> f && f != "-") {
    }
    Mount m;
    m.root = root, m.point = point;
    std::string source;
    ss >> m.type >> source >> m.options;
    if (m.type == "cgroup" || m.type == "cgroup2") out.push_back(m);
  }
  return out;
}

// A limit file's value in bytes; 0 for "max", an effectively unlimited v1 value, or unreadable.
double read_limit(const std::string& file) {
  std::ifstream in(file);
  std::string v;
  if (!(in >> v) || v == "max") return 0;
  char* end = nullptr;
  const double b = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || b <= 0 || b >= 4e18) return 0;  // v1 says "unlimited" as ~2^63
  return b;
}

// The smallest limit on `path` and its parents below the mount point.
double limit_along(const Mount& m, std::string path, const std::string& name, std::string* file) {
  if (m.root != "/" && path.rfind(m.root, 0) == 0) path = path.substr(m.root.size());
  double best = 0;
  for (;;) {
    const std::string f = m.point + (path == "/" ? "" : path) + "/" + name;
    const double b = read_limit(f);
    if (b > 0 && (best == 0 || b < best)) best = b, *file = f;
    if (path.empty() || path == "/") break;
    const size_t slash = path.rfind('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return best;
}

}  // namespace

double cgroup_memory_limit(std::string* file) {
  const std::vector<Mount> mounts = cgroup_mounts();
  double best = 0;
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    // "0::/path" (v2) or "4:memory:/path" (v1)
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    const bool v2 = controllers.empty();
    bool memory = v2;
    for (const std::string& c : split(controllers, ','))
      if (c == "memory") memory = true;
    if (!memory) continue;
    for (const Mount& m : mounts) {
      const bool fits = v2 ? m.type == "cgroup2" : m.type == "cgroup" && m.options.find("memory") != std::string::npos;
      if (!fits) continue;
      std::string f;
      const double lim = limit_along(m, path, v2 ? "memory.max" : "memory.limit_in_bytes", &f);
      if (lim > 0 && (best == 0 || lim < best)) best = lim, *file = f;
    }
  }
  return best;
}

MemoryLimit available_memory() {
  MemoryLimit out;
  std::string file;
  if (const double cg = cgroup_memory_limit(&file); cg > 0) {
    out.bytes = cg;
    out.source = "the cgroup memory limit, " + file;
  }
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream ss(line);
    std::string key;
    double kb = 0;
    ss >> key >> kb;
    if (key == "MemAvailable:") {
      if (out.bytes == 0 || kb * 1024 < out.bytes) {
        out.bytes = kb * 1024;
        out.source = "the machine's available memory (MemAvailable in /proc/meminfo)";
      }
      break;
    }
  }
  return out;
}

}  // namespace ft
