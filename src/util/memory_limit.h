// How much memory this process may use: the smallest of its cgroup's memory limit (cgroup v2
// memory.max, v1 memory.limit_in_bytes, of its cgroup and every parent) and the machine's
// MemAvailable. The OOM killer acts on the first, the machine runs out at the second.
//
//   MemoryLimit m = available_memory();
//   if (need > m.bytes) throw Error(fmt::format("... {} ({})", human_bytes(m.bytes), m.source));
//
// Tests on machines where they cannot create a cgroup stand a limit in for the answer through the
// fault injector (FaultInjector::memory_limit(), fault/inject.h), passed in by the caller.
#pragma once

#include <string>

namespace ft {

struct MemoryLimit {
  double bytes = 0;    // 0: unknown (no cgroup limit and no /proc/meminfo)
  std::string source;  // "cgroup memory limit (/sys/fs/cgroup/x/memory.max)", "MemAvailable", ...
};

MemoryLimit available_memory();

// The cgroup limit alone (0: none). `file` receives the limit file that sets it.
double cgroup_memory_limit(std::string* file);

}  // namespace ft
