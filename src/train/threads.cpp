#include "train/threads.h"

#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "parallel/comm/comm.h"
#include "tensor/backend.h"
#include "util/cpu_budget.h"

namespace ft {
namespace {

constexpr int kMaskWords = 16;  // 1024 CPUs

struct RankCpus {
  uint64_t host = 0;
  std::array<uint64_t, kMaskWords> mask{};
};

uint64_t host_id() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return std::hash<std::string>()(name);
}

RankCpus this_rank(const CpuBudget& b) {
  RankCpus r;
  r.host = host_id();
  for (int c : b.cpus)
    if (c < 64 * kMaskWords) r.mask[c / 64] |= uint64_t{1} << (c % 64);
  return r;
}

bool overlap(const RankCpus& a, const RankCpus& b) {
  if (a.host != b.host) return false;
  for (int i = 0; i < kMaskWords; ++i)
    if (a.mask[i] & b.mask[i]) return true;
  return false;
}

}  // namespace

int omp_num_threads_from_env() {
  const char* v = std::getenv("OMP_NUM_THREADS");
  if (!v || !*v) return 0;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);  // "4" or "4,2" (nested levels): the first level
  if (end == v || (*end != '\0' && *end != ',') || n <= 0 || n > 4096) return 0;
  return static_cast<int>(n);
}

ThreadChoice choose_threads(int configured, Communicator& world, const Backend& backend) {
  // Every rank takes part in the gather, whichever rule decides its own count.
  const CpuBudget budget = read_cpu_budget();
  const RankCpus mine = this_rank(budget);
  std::vector<RankCpus> all(static_cast<size_t>(world.size()));
  world.all_gather(all.data(), &mine, sizeof mine);
  int sharing = 0;
  for (const RankCpus& r : all) sharing += overlap(mine, r) ? 1 : 0;
  sharing = std::max(1, sharing);

  const HostCpus host{.configured = configured,
                      .from_env = omp_num_threads_from_env(),
                      .usable = budget.usable(),
                      .sharing = sharing,
                      .budget = budget.describe()};
  return backend_threads(backend, host);
}

}  // namespace ft
