// How many threads a rank computes with (OpenMP, and so oneDNN), and why.
//
//   ThreadChoice t = choose_threads(cfg.train.threads, mesh.world());
//   omp_set_num_threads(t.threads);
//   log_info("{} threads per rank ({})", t.threads, t.source);
//
// In order: train.threads when set (> 0); else OMP_NUM_THREADS when the user set it; else the
// CPUs this rank may use — its affinity mask capped by its cgroup quota (util/cpu_budget.h) —
// divided among the ranks on this host whose affinity masks overlap this one's (ranks bound to
// their own cores keep theirs; unbound ranks share the machine). Collective over `world`.
#pragma once

#include <string>

namespace ft {

class Communicator;

struct ThreadChoice {
  int threads = 1;
  std::string source;  // "train.threads = 4", "OMP_NUM_THREADS=3", "affinity 2 CPUs (0-1); ..."
};

ThreadChoice choose_threads(int configured, Communicator& world);

// The thread count OMP_NUM_THREADS asks for (its first entry), or 0 when unset or invalid.
int omp_num_threads_from_env();

}  // namespace ft
