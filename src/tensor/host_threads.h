// How many host threads a rank runs with, as its device's backend decides it (Backend::threads,
// tensor/backend.h) from what the host offers the rank (gathered over the ranks by
// train/threads.cpp).
//
//   HostCpus h{.configured = 0, .from_env = 0, .usable = 8, .sharing = 2, .budget = "affinity 8 CPUs (0-7)"};
//   ThreadChoice t = host_share(h);      // the CPU's rule: 4 threads ("8 usable CPUs shared by 2 ranks ...")
//   ThreadChoice g = gpu_host_threads(h); // a GPU rank's: at most kGpuHostThreads of them
#pragma once

#include <string>

namespace ft {

// What this rank's host offers it.
struct HostCpus {
  int configured = 0;  // train.threads (0: not set)
  int from_env = 0;    // OMP_NUM_THREADS's first entry (0: not set or invalid)
  int usable = 1;      // CPUs the rank may use: its affinity mask capped by its cgroup quota
  int sharing = 1;     // ranks on this host whose affinity masks overlap this one's (itself included)
  std::string budget;  // how `usable` was found: "affinity 2 CPUs (0-1); cgroup quota none"
};

// The thread count and why ("train.threads = 4", "OMP_NUM_THREADS=3", "8 usable CPUs shared by ...").
struct ThreadChoice {
  int threads = 1;
  std::string source;
};

// The rule of a device whose ops run on the host's threads (the CPU): train.threads when set;
// else OMP_NUM_THREADS; else the usable CPUs divided among the ranks sharing them.
ThreadChoice host_share(const HostCpus& h);

// A GPU rank's host threads only feed its device (the loader, checkpoint hashing and I/O, host
// reductions of small scalars); more than a few of them would contend with the NCCL proxy and
// the other ranks' feeders for nothing. The rule above, capped at this many unless set by the user.
inline constexpr int kGpuHostThreads = 4;
ThreadChoice gpu_host_threads(const HostCpus& h);

}  // namespace ft
