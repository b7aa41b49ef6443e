#include "tensor/host_threads.h"

#include <fmt/format.h>

#include <algorithm>

namespace ft {

ThreadChoice host_share(const HostCpus& h) {
  if (h.configured > 0) return {h.configured, fmt::format("train.threads = {}", h.configured)};
  if (h.from_env > 0) return {h.from_env, fmt::format("OMP_NUM_THREADS={}", h.from_env)};
  const int sharing = std::max(1, h.sharing);
  return {std::max(1, h.usable / sharing),
          fmt::format("{} usable CPU{} shared by {} rank{} on this host: {}", h.usable, h.usable == 1 ? "" : "s",
                      sharing, sharing == 1 ? "" : "s", h.budget)};
}

ThreadChoice gpu_host_threads(const HostCpus& h) {
  ThreadChoice t = host_share(h);
  if (h.configured > 0 || h.from_env > 0 || t.threads <= kGpuHostThreads) return t;
  return {kGpuHostThreads,
          fmt::format("{}; a GPU rank's host threads only feed its device: at most {}", t.source, kGpuHostThreads)};
}

}  // namespace ft
