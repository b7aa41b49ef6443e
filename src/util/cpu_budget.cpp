#include "util/cpu_budget.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "util/strings.h"

namespace ft {
namespace {

std::string read_small_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<int> affinity_cpus() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

// This process's cgroup path in the hierarchy whose controller list contains `controller`
// (v1), or the unified one ("0::/path", v2) when controller is empty.
std::string cgroup_path(const std::string& controller) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string ctrls = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controller.empty()) {
      if (line.compare(0, a, "0") == 0 && ctrls.empty()) return path;
      continue;
    }
    for (auto c : split(ctrls, ','))
      if (c == controller) return path;
  }
  return {};
}

// Walks from the cgroup up to the root of its mount, keeping the smallest quota.
template <typename Read>
void walk_up(const std::string& mount, std::string path, CpuBudget& b, Read read) {
  while (true) {
    std::string dir = mount + (path == "/" ? "" : path);
    double q = read(dir);
    if (q > 0 && (b.quota_cpus == 0 || q < b.quota_cpus)) {
      b.quota_cpus = q;
      b.quota_file = dir;
    }
    if (path.empty() || path == "/") break;
    auto slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
}

double read_v1(const std::string& dir) {
  std::string q = read_small_file(dir + "/cpu.cfs_quota_us"), p = read_small_file(dir + "/cpu.cfs_period_us");
  if (q.empty() || p.empty()) return 0;
  double quota = std::atof(q.c_str()), period = std::atof(p.c_str());
  return quota > 0 && period > 0 ? quota / period : 0;
}

double read_v2(const std::string& dir) {
  return parse_cgroup_v2_cpu_max(read_small_file(dir + "/cpu.max"));
}

}  // namespace

double parse_cgroup_v2_cpu_max(const std::string& text) {
  std::istringstream in(text);
  std::string quota, period;
  if (!(in >> quota >> period) || quota == "max") return 0;
  double q = std::atof(quota.c_str()), p = std::atof(period.c_str());
  return q > 0 && p > 0 ? q / p : 0;
}

int CpuBudget::usable() const {
  int n = std::max<int>(1, static_cast<int>(cpus.size()));
  if (quota_cpus > 0) n = std::min(n, std::max(1, static_cast<int>(std::ceil(quota_cpus - 1e-9))));
  return n;
}

std::string CpuBudget::describe() const {
  std::string q = quota_cpus > 0 ? fmt::format("{:.2f} CPUs ({})", quota_cpus, quota_file) : "none";
  return fmt::format("affinity {} CPU{} ({}); cgroup quota {}", cpus.size(), cpus.size() == 1 ? "" : "s",
                     format_cpu_list(cpus), q);
}

CpuBudget read_cpu_budget() {
  CpuBudget b;
  b.cpus = affinity_cpus();
  if (std::string p = cgroup_path(""); !p.empty()) walk_up("/sys/fs/cgroup", p, b, read_v2);
  if (std::string p = cgroup_path("cpu"); !p.empty()) {
    for (const char* mount : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) walk_up(mount, p, b, read_v1);
  }
  return b;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string s;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!s.empty()) s += ',';
    s += j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return s.empty() ? "none" : s;
}

}  // namespace ft
