// How many threads a rank computes with (OpenMP, and so oneDNN), and why.
//
//   ThreadChoice t = choose_threads(cfg.train.threads, mesh.world(), backend_of(ctx));
//   omp_set_num_threads(t.threads);
//   log_info("{} threads per rank ({})", t.threads, t.source);
//
// What the host offers each rank is measured here: train.threads, OMP_NUM_THREADS, and the CPUs
// this rank may use — its affinity mask capped by its cgroup quota (util/cpu_budget.h) — shared
// with the ranks on this host whose affinity masks overlap this one's (ranks bound to their own
// cores keep theirs; unbound ranks share the machine). The rank's device's backend decides from
// that (Backend::threads, tensor/host_threads.h): on the CPU every usable CPU computes, a GPU
// rank keeps a few to feed its device. Collective over `world`.
#pragma once

#include "tensor/host_threads.h"

namespace ft {

class Communicator;
struct Backend;

ThreadChoice choose_threads(int configured, Communicator& world, const Backend& backend);

// The thread count OMP_NUM_THREADS asks for (its first entry), or 0 when unset or invalid.
int omp_num_threads_from_env();

}  // namespace ft
