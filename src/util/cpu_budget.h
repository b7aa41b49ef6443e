// The CPUs this process may use: its affinity mask (taskset, mpirun --bind-to, Slurm's
// --cpus-per-task binding) and its cgroup's CPU quota (a Kubernetes CPU limit, docker --cpus).
//
//   ft::CpuBudget b = ft::read_cpu_budget();
//   int cpus = b.usable();                 // min(affinity CPUs, ceil(quota)), at least 1
//   log_info("{}", b.describe());          // "affinity 2 CPUs (0-1); cgroup quota none"
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ft {

struct CpuBudget {
  std::vector<int> cpus;   // CPU ids in the affinity mask, ascending
  double quota_cpus = 0;   // cgroup CPU quota in CPUs (quota / period); 0 = no quota
  std::string quota_file;  // where the quota was read ("" = none found)

  // CPUs usable at once: the affinity count, capped by the quota rounded up; at least 1.
  int usable() const;
  std::string describe() const;
};

// Reads the affinity mask (sched_getaffinity) and the cgroup quota (v2 cpu.max or v1
// cpu.cfs_quota_us / cpu.cfs_period_us of this process's cgroup and its ancestors; the smallest).
CpuBudget read_cpu_budget();

// The quota in CPUs from the contents of a v2 cpu.max file ("max 100000", "150000 100000");
// 0 when unlimited or unreadable.
double parse_cgroup_v2_cpu_max(const std::string& text);

// "0-3,8,10-11" for {0, 1, 2, 3, 8, 10, 11}.
std::string format_cpu_list(const std::vector<int>& cpus);

}  // namespace ft
